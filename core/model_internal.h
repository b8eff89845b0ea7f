/* model_internal.h - what model.c and session.c share. Not part of the public API. */
#ifndef KI_MODEL_INTERNAL_H
#define KI_MODEL_INTERNAL_H

#include "../layers/registry.h"
#include "graph.h"
#include "kinfer.h"
#include "zip.h"

struct ki_model {
    ki_graph *g;
    ki_zip *zip;
    float *weights; /* all attributes as float32, one aligned block */
    size_t weight_bytes;
    const ki_layer_ops **layer; /* per node (file order); NULL for graph-only loads */
    void **state;               /* per node */
    int n_exec;
    int *exec; /* nodes to run, in execution order */
};

/* Converts every attribute's .bin entry to float32 (weights.c). */
ki_status ki_weights_attach(ki_model *m, bool verify_crc, ki_error *err);

#endif
