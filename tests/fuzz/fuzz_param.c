/* fuzz_param.c - libFuzzer target for the .pnnx.param reader: ki_param_parse on the input bytes,
 * then ki_graph_build (name resolution, folding, topological sort). Built by tests/fuzz/fuzz.mk
 * (`make fuzz-param`) with ASan and UBSan; every finding becomes a test in
 * tests/unit/test_hard_param.c. */
#include <stdint.h>
#include <stdlib.h>

#include "../../core/graph.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ki_graph *g = NULL;
    ki_error err;
    if (ki_param_parse("fuzz.param", (const char *)data, size, &g, &err) != KI_OK) {
        return 0;
    }
    if (ki_graph_build(g, &err) == KI_OK) {
        /* the order must be a permutation of the nodes */
        for (int k = 0; k < g->n_nodes; k++) {
            if (g->order[k] < 0 || g->order[k] >= g->n_nodes) {
                abort();
            }
        }
    }
    ki_graph_destroy(g);
    return 0;
}
