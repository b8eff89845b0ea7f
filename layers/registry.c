/* registry.c - every layer kinfer has. Each family lists its ki_layer_ops symbols in a
 * layers/reg_<family>.def file as KI_LAYER(symbol) lines; this file gathers them. The table is
 * small (about a hundred entries) and searched only while a model loads. */
#include "registry.h"

#include <string.h>

#define KI_LAYER(sym) extern const ki_layer_ops sym;
#include "reg_basic.def"
#include "reg_conv.def"
#include "reg_elementwise.def"
#include "reg_expr.def"
#include "reg_ops3d.def"
#include "reg_ops_func.def"
#include "reg_ops_misc.def"
#include "reg_ops_rnn.def"
#include "reg_ops_tv.def"
#include "reg_shape.def"
#include "reg_yolo.def"
#undef KI_LAYER

#define KI_LAYER(sym) &sym,
static const ki_layer_ops *const table[] = {
#include "reg_basic.def"
#include "reg_conv.def"
#include "reg_elementwise.def"
#include "reg_expr.def"
#include "reg_ops3d.def"
#include "reg_ops_func.def"
#include "reg_ops_misc.def"
#include "reg_ops_rnn.def"
#include "reg_ops_tv.def"
#include "reg_shape.def"
#include "reg_yolo.def"
};
#undef KI_LAYER

const ki_layer_ops *ki_registry_find(const char *type)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(table[i]->type, type) == 0) {
            return table[i];
        }
    }
    return NULL;
}

int ki_registry_count(void)
{
    return (int)(sizeof table / sizeof table[0]);
}

const ki_layer_ops *ki_registry_at(int i)
{
    return (i >= 0 && i < ki_registry_count()) ? table[i] : NULL;
}
