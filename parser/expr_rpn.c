/* expr_rpn.c - tree to RPN (post-order) code, with the maximum stack depth.
 *
 * The walk is iterative (parent and sibling links), so it needs no stack of its own. size(@i,d)
 * becomes one leaf instruction (SIZE) because it reads a shape, not values; size(@i) (the whole
 * shape) is accepted only as the whole expression. Things that parse but cannot be evaluated
 * (None, complex numbers and casts) are rejected here with KI_ERR_UNSUPPORTED. */
#include <stdio.h>
#include <stdlib.h>

#include "expr.h"

typedef struct emitter {
    ki_expr *e;
    int depth; /* current stack depth */
    size_t *err_pos;
    ki_error *err;
} emitter;

static ki_status rpn_fail(emitter *em, ki_status code, int node, const char *what)
{
    size_t pos = em->e->tokens[em->e->nodes[node].tok].start;
    if (em->err_pos) {
        *em->err_pos = pos;
    }
    return ki_expr_fail_at(em->err, code, em->e, pos, what);
}

static void emit(emitter *em, const ki_expr_ins *ins, int pops, int pushes)
{
    em->e->code[em->e->n_code++] = *ins;
    em->depth += pushes - pops;
    if (em->depth > em->e->max_stack) {
        em->e->max_stack = em->depth;
    }
}

/* size(@i,d) or size(@i) -> SIZE or SHAPE. */
static ki_status emit_size(emitter *em, int node, ki_expr_ins *ins)
{
    const ki_expr_node *nodes = em->e->nodes;
    const ki_expr_node *a = &nodes[nodes[node].first_child];
    if (a->kind != KI_NODE_REF) {
        return rpn_fail(em, KI_ERR_UNSUPPORTED, node, "size() needs an input @N first");
    }
    ins->ref = (int)a->ival;
    if (nodes[node].n_children == 1) {
        if (node != em->e->root) {
            return rpn_fail(em, KI_ERR_UNSUPPORTED, node,
                            "size(@N) with one argument may only be the whole expression");
        }
        ins->op = KI_EOP_SHAPE;
        em->e->is_list = true;
        emit(em, ins, 0, 1);
        return KI_OK;
    }
    const ki_expr_node *d = &nodes[a->next_sibling];
    if (d->kind != KI_NODE_NUM || !d->is_int) {
        return rpn_fail(em, KI_ERR_UNSUPPORTED, node, "size() needs an integer dimension");
    }
    ins->op = KI_EOP_SIZE;
    ins->dim = d->ival;
    emit(em, ins, 0, 1);
    return KI_OK;
}

static ki_status emit_node(emitter *em, int node)
{
    const ki_expr_node *n = &em->e->nodes[node];
    ki_expr_ins ins = { .op = n->op, .pos = em->e->tokens[n->tok].start };
    switch (n->kind) {
    case KI_NODE_REF:
        ins.op = KI_EOP_REF;
        ins.ref = (int)n->ival;
        emit(em, &ins, 0, 1);
        return KI_OK;
    case KI_NODE_NUM:
        ins.op = KI_EOP_CONST;
        ins.value = n->is_int ? (double)n->ival : n->value;
        ins.ival = n->ival;
        ins.is_int = n->is_int;
        emit(em, &ins, 0, 1);
        return KI_OK;
    case KI_NODE_LIST:
        ins.op = KI_EOP_LIST;
        ins.n = n->n_children;
        em->e->is_list = true;
        emit(em, &ins, n->n_children, 0);
        return KI_OK;
    case KI_NODE_COMPLEX:
        return rpn_fail(em, KI_ERR_UNSUPPORTED, node, "complex numbers are not supported");
    case KI_NODE_NONE:
        return rpn_fail(em, KI_ERR_UNSUPPORTED, node, "None cannot be evaluated");
    default:
        break;
    }
    if (n->op == KI_EOP_SIZE_CALL) {
        return emit_size(em, node, &ins);
    }
    if (n->op >= KI_EOP_TO_COMPLEX32 && n->op <= KI_EOP_TO_COMPLEX128) {
        return rpn_fail(em, KI_ERR_UNSUPPORTED, node, "complex casts are not supported");
    }
    emit(em, &ins, n->n_children, 1);
    return KI_OK;
}

/* Descends to the first leaf below `node`; size() calls count as leaves. */
static int descend(const ki_expr *e, int node)
{
    while (e->nodes[node].first_child >= 0 &&
           !(e->nodes[node].kind == KI_NODE_CALL && e->nodes[node].op == KI_EOP_SIZE_CALL)) {
        node = e->nodes[node].first_child;
    }
    return node;
}

ki_status ki_expr_to_rpn(ki_expr *e, size_t *err_pos, ki_error *err)
{
    emitter em = { .e = e, .depth = 0, .err_pos = err_pos, .err = err };
    e->n_code = 0;
    e->max_stack = 0;
    e->is_list = false;
    if (e->is_string) {
        return KI_OK;
    }
    free(e->code);
    e->code = malloc((size_t)e->n_nodes * sizeof *e->code);
    if (!e->code) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory converting an expression");
    }
    int node = descend(e, e->root);
    for (;;) {
        ki_status st = emit_node(&em, node);
        if (st != KI_OK) {
            return st;
        }
        if (node == e->root) {
            break;
        }
        int next = e->nodes[node].next_sibling;
        node = next >= 0 ? descend(e, next) : e->nodes[node].parent;
    }
    if (e->max_stack < 1) {
        e->max_stack = 1; /* an empty list still needs a valid stack pointer */
    }
    return KI_OK;
}
