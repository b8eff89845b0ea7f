/* registry.h - the table of layers, keyed by PNNX type string. Static and read-only. */
#ifndef KI_REGISTRY_H
#define KI_REGISTRY_H

#include "../core/layer.h"

/* The layer for a PNNX type, or NULL when kinfer does not implement it. */
const ki_layer_ops *ki_registry_find(const char *type);
int ki_registry_count(void);
const ki_layer_ops *ki_registry_at(int i);

#endif
