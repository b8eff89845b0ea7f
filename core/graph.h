/* graph.h - the operator graph read from a .pnnx.param file.
 *
 * ki_param_parse fills a ki_graph in file order (state KI_GRAPH_NEED_BUILD); ki_graph_build
 * resolves operand names to indices, checks that every operand has exactly one producer,
 * folds prim::TupleConstruct/ListConstruct feeding pnnx.Output into several model outputs,
 * and orders the operators topologically with Kahn's algorithm (iterative; ties keep file
 * order). Building again is harmless. All memory lives in the graph's arena. Not thread-safe
 * while building; read-only afterwards. */
#ifndef KI_GRAPH_H
#define KI_GRAPH_H

#include "arena.h"
#include "layer.h"
#include "status.h"

#define KI_MAX_OPS        1000000
#define KI_MAX_OP_ARGS    4096 /* inputs or outputs of one operator */
#define KI_MAX_ITEMS      4096 /* params/attributes of one operator */
#define KI_MAX_LIST       4096 /* elements of one list parameter */
#define KI_MAX_PARAM_FILE ((size_t)1 << 30)

typedef enum ki_graph_state {
    KI_GRAPH_NEED_INIT = 0,
    KI_GRAPH_NEED_BUILD,
    KI_GRAPH_COMPLETE
} ki_graph_state;

typedef struct ki_operand {
    const char *name;
    int producer;      /* node index, -1 if none */
    int producer_slot; /* output position on the producer */
    int n_consumers;
    ki_shape decl; /* `#` annotation (ndim -1 when none) */
    ki_dtype dtype;
} ki_operand;

typedef struct ki_node {
    ki_op_desc desc;
    int *in;  /* operand index per input */
    int *out; /* operand index per output */
} ki_node;

typedef struct ki_graph {
    ki_arena *arena;
    const char *path;
    ki_graph_state state;
    int n_nodes;
    ki_node *nodes; /* file order */
    int n_operands;
    ki_operand *operands;
    int *order; /* execution order: node indices */
    int n_inputs;
    int *inputs; /* operands produced by pnnx.Input, file order */
    int n_outputs;
    int *outputs; /* operands consumed by pnnx.Output (tuples expanded), file order */
} ki_graph;

/* Parses param text (len bytes, need not be NUL-terminated). path is used in messages. */
ki_status ki_param_parse(const char *path, const char *text, size_t len, ki_graph **out,
                         ki_error *err);
/* Reads and parses a file. */
ki_status ki_param_load(const char *path, ki_graph **out, ki_error *err);
ki_status ki_graph_build(ki_graph *g, ki_error *err);
void ki_graph_destroy(ki_graph *g);
/* Folds list/string-carrying TorchScript leftovers (fold.c); called by ki_graph_build. */
ki_status ki_graph_fold(ki_graph *g, ki_error *err);

/* Classifies one parameter value as pnnx does (pnnx-format.md §1.5), into p (arena memory). */
ki_status ki_param_value_parse(ki_arena *a, const char *text, size_t len, ki_param *p,
                               ki_error *err);
/* Parses "(d0,d1,...)TYPE"; '?' dims become -1 when allow_unknown. */
ki_status ki_param_shape_parse(const char *text, size_t len, bool allow_unknown, ki_shape *shape,
                               ki_dtype *dtype, ki_error *err);

#endif
