/* layer.h - what a layer sees of its operator, and the table of functions a layer provides.
 *
 * The loader turns each operator line of a .pnnx.param file into a ki_op_desc: typed parameters,
 * attributes (weights, already converted to float32), input keys from `$key=` items and the
 * annotated shapes. The registry (layers/registry.c) maps the PNNX type string to a ki_layer_ops.
 *
 * Life of a layer: create() once per model (validate params and attributes, keep what forward
 * needs; the ki_op_desc and attribute data outlive the state), shape() for each set of concrete
 * input shapes (checks everything, so forward() cannot fail on user data), workspace() for the
 * scratch bytes forward() needs, forward() many times, destroy() once. State is const after
 * create: shape() and forward() may run for several sessions at once.
 *
 * Layer messages need not name the operator: the caller prefixes "file:line: op 'name' (type)". */
#ifndef KI_LAYER_H
#define KI_LAYER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"
#include "tensor.h"

typedef enum ki_param_kind {
    KI_PARAM_NONE = 0, /* None, (), [], or an empty value */
    KI_PARAM_BOOL,     /* True / False: i is 0 or 1 */
    KI_PARAM_INT,      /* i */
    KI_PARAM_FLOAT,    /* f */
    KI_PARAM_STRING,   /* s (also inf/-inf/nan spellings: see ki_op_get_float) */
    KI_PARAM_COMPLEX,  /* f + fi*j */
    KI_PARAM_INTS,     /* n ints in ints[] (and the same numbers in floats[]) */
    KI_PARAM_FLOATS,   /* n floats in floats[] (at least one element was a float) */
    KI_PARAM_STRINGS,  /* n strings in strs[] */
    KI_PARAM_COMPLEXES /* n complex numbers: floats[2k] real, floats[2k+1] imaginary */
} ki_param_kind;

typedef struct ki_param {
    const char *key;
    const char *raw; /* the value exactly as written */
    ki_param_kind kind;
    int64_t i;
    double f, fi;
    const char *s;
    int n;
    const int64_t *ints;
    const double *floats;
    const char *const *strs;
} ki_param;

typedef enum ki_dtype {
    KI_DT_NULL = 0,
    KI_DT_F32,
    KI_DT_F64,
    KI_DT_F16,
    KI_DT_BF16,
    KI_DT_I8,
    KI_DT_U8,
    KI_DT_I16,
    KI_DT_I32,
    KI_DT_I64,
    KI_DT_BOOL,
    KI_DT_C32,
    KI_DT_C64,
    KI_DT_C128
} ki_dtype;

/* Bytes of one element of t (0 for KI_DT_NULL); its name as pnnx writes it (f32, i64, ...). */
size_t ki_dtype_size(ki_dtype t);
const char *ki_dtype_name(ki_dtype t);

typedef struct ki_attr {
    const char *key;
    ki_shape shape;    /* as declared; a `()` declaration is a rank-0 shape of one element */
    ki_dtype dtype;    /* element type in the file */
    const float *data; /* numel floats, 64-byte aligned; NULL when no .bin was loaded */
    int64_t numel;
} ki_attr;

typedef struct ki_op_desc {
    const char *type;
    const char *name;
    const char *file; /* the .param path, for messages */
    int line;         /* 1-based line in the .param file */
    int n_inputs, n_outputs;
    const char *const *input_names; /* operand names */
    const char *const *output_names;
    const char *const *input_keys; /* the `$key` of each input, or NULL when unnamed */
    const ki_shape *input_decl;    /* `#` annotations; ndim -1 when absent */
    const ki_shape *output_decl;
    const ki_dtype *input_dtype;
    const ki_dtype *output_dtype;
    int n_params;
    const ki_param *params;
    int n_attrs;
    const ki_attr *attrs;
    /* The attributes live in the loader's own weight block, which a layer may partly give back
     * once it keeps its own form of an attribute (ki_op_release_attr); false for descriptions
     * built elsewhere (tests, tools), whose data is left alone. */
    bool attrs_releasable;
} ki_op_desc;

/* Per-run context handed to forward(). */
typedef struct ki_exec {
    int n_threads;        /* size of the OpenMP team to use in this op's one parallel region */
    void *workspace;      /* workspace() bytes for each thread, 64-byte aligned, thread t at */
    size_t ws_per_thread; /*   (char *)workspace + t * ws_per_thread */
    /* Set when every thread of the session's running team calls forward() (KI_LAYER_TEAM
     * layers only): the layer then runs its parallel part through ki_team_run (core/team.h). */
    struct ki_crew *crew;
} ki_exec;

/* Thread tid's slice of ex's workspace. */
static inline float *ki_exec_slice(const ki_exec *ex, int tid)
{
    return (float *)(void *)((char *)ex->workspace + (size_t)tid * ex->ws_per_thread);
}

enum {
    KI_LAYER_INPLACE = 1u << 0, /* output 0 may be the same buffer as input 0 (same size) */
    KI_LAYER_VIEW = 1u << 1,    /* output 0 is input 0's data under another shape */
    KI_LAYER_GRAPH = 1u << 2,   /* handled by the graph itself (pnnx.Input, pnnx.Output, tuples
                                 * feeding an output); never created or run */
    KI_LAYER_TEAM = 1u << 3     /* forward() may be called by every thread of a running team
                                 * (ki_exec.crew): its parallel parts go through ki_team_run, and
                                 * what it does outside them is the same on every thread, or only
                                 * reads */
};

typedef struct ki_layer_ops {
    const char *type; /* PNNX type string, e.g. "nn.Conv2d" */
    unsigned flags;
    ki_status (*create)(const ki_op_desc *op, void **state, ki_error *err);
    /* in[] holds concrete shapes (and values of SCALAR/LIST inputs); fill out[0..n_out-1]. */
    ki_status (*shape)(const void *state, const ki_shape *in, int n_in, ki_shape *out, int n_out,
                       ki_error *err);
    /* Scratch bytes per thread for these shapes; NULL means none. */
    size_t (*workspace)(const void *state, const ki_shape *in, int n_in, const ki_shape *out,
                        int n_out, int n_threads);
    /* For VIEW layers out[0].data == in[0].data when the planner aliased them; forward must then
     * do nothing, and copy otherwise. */
    ki_status (*forward)(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                         int n_out, const ki_exec *ex);
    void (*destroy)(void *state); /* NULL: nothing to free (state must then be NULL) */
    /* Optional: absorb `next`, the only consumer of this op's single output, into this layer
     * (e.g. an activation into a convolution's epilogue). `slot` is the input of `next` that
     * reads this op's output. Called after create() of both, possibly several times in a row.
     * Return true when absorbed and exact: the loader then drops `next`, and this op writes
     * next's output operand. When `next` has two inputs (a residual add), its other input is
     * appended to this op's inputs: shape() and forward() then see one more input, of next's
     * output shape. Two-input operators are offered only when that other input is computed
     * before this op runs. */
    bool (*fuse)(void *state, const ki_op_desc *next, int slot);
    /* Optional, tried before fuse: the same offer with next's created state (next_state, of
     * layer next_layer) as well. Return true when absorbed, as fuse; with *taken set, this layer
     * keeps next_state as its own from then on (the loader neither runs nor destroys it). For a
     * consumer whose create gave back attribute data (ki_op_release_attr), which a layer made
     * again from `next` would lack. */
    bool (*fuse_state)(void *state, const ki_op_desc *next, const struct ki_layer_ops *next_layer,
                       void *next_state, int slot, bool *taken);
    /* Optional, for layers whose output 0 is their inputs laid end to end (torch.cat along its
     * outermost dim of more than one element): true when, for these shapes, input i is the
     * contiguous byte range [off[i], off[i] + its size) of output 0. The planner may then place
     * the inputs there (their producers write straight into the output), and forward must skip
     * an input whose data already is at its place. */
    bool (*joins)(const void *state, const ki_shape *in, int n_in, const ki_shape *out,
                  size_t *off);
    /* Optional: names the kernel these shapes run (path, tiles, instruction set), e.g.
     * "winograd F(4x4) avx2", into buf (n bytes), for profiles. */
    void (*describe)(const void *state, const ki_shape *in, int n_in, char *buf, size_t n);
    /* Optional: the multiply-adds of one run at these input shapes, those of the consumers fuse()
     * absorbed included (a depthwise or dense layer after a convolution), for profiles; -1 when
     * they cannot be counted. Without it, profiles count by operator type and shapes. */
    double (*macs)(const void *state, const ki_shape *in, int n_in);
} ki_layer_ops;

/* ---- reading an operator's parameters (core/opdesc.c) ----
 * Each getter returns KI_OK and sets *out (to the default when the key is absent or None),
 * or fails with KI_ERR_FORMAT naming the key when the value has the wrong kind. */
const ki_param *ki_op_param(const ki_op_desc *op, const char *key);
bool ki_op_has(const ki_op_desc *op, const char *key); /* present and not None */
ki_status ki_op_get_int(const ki_op_desc *op, const char *key, int64_t def, int64_t *out,
                        ki_error *err);
ki_status ki_op_get_bool(const ki_op_desc *op, const char *key, bool def, bool *out, ki_error *err);
/* Accepts float or int spellings and inf/-inf/nan strings. */
ki_status ki_op_get_float(const ki_op_desc *op, const char *key, double def, double *out,
                          ki_error *err);
ki_status ki_op_get_string(const ki_op_desc *op, const char *key, const char *def, const char **out,
                           ki_error *err);
/* An int list of exactly n entries; a single int is repeated n times (PyTorch's `2` for
 * `(2,2)`). Absent or None: out gets def[0..n-1] (def may be NULL only if the key is required,
 * in which case absence is an error). */
ki_status ki_op_get_ints(const ki_op_desc *op, const char *key, int n, const int64_t *def,
                         int64_t *out, ki_error *err);
/* A list of any length up to max (ints); *n_out gets its length; absent/None gives *n_out = -1. */
ki_status ki_op_get_int_list(const ki_op_desc *op, const char *key, int max, int64_t *out,
                             int *n_out, ki_error *err);
/* Same for numbers (int or float elements). */
ki_status ki_op_get_float_list(const ki_op_desc *op, const char *key, int max, double *out,
                               int *n_out, ki_error *err);

const ki_attr *ki_op_attr(const ki_op_desc *op, const char *key);
/* Called by a layer's create() for an attribute of op it will never read again (it made its
 * own copy, e.g. repacked weights): when op->attrs_releasable, the attribute's memory goes back
 * to the system and reads as zeros afterwards; otherwise nothing happens. Returns whether it
 * was released, so the layer can drop its pointer to the data. */
bool ki_op_release_attr(const ki_op_desc *op, const ki_attr *a);
/* Finds attribute key with exactly the given rank and dims (a dim of -1 matches anything). */
ki_status ki_op_require_attr(const ki_op_desc *op, const char *key, int ndim, const int64_t *dims,
                             const ki_attr **out, ki_error *err);
/* Index of the input bound to `$key`, or -1. */
int ki_op_input_index(const ki_op_desc *op, const char *key);
/* The same, or pos when no input is bound to `$key` and input pos carries no `$` name (the
 * argument passed by position); else -1. */
int ki_op_input_slot(const ki_op_desc *op, const char *key, int pos);

#endif
