/* test_graph.c - graph building: topological order on real models, a 100,000-operator chain
 * (nothing recurses), the seed example graph, the list/string folds, and the memory planner. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the headers above first */
// clang-format off
#include <cmocka.h>
// clang-format on

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/graph.h"
#include "../../core/plan.h"

/* Every operator comes after the producers of all its inputs. */
static void assert_topological(const ki_graph *g)
{
    int *pos = calloc((size_t)g->n_nodes + 1, sizeof *pos);
    for (int k = 0; k < g->n_nodes; k++) {
        pos[g->order[k]] = k;
    }
    for (int n = 0; n < g->n_nodes; n++) {
        for (int i = 0; i < g->nodes[n].desc.n_inputs; i++) {
            int p = g->operands[g->nodes[n].in[i]].producer;
            assert_true(p >= 0);
            assert_true(pos[p] < pos[n]);
        }
    }
    free(pos);
}

static int check_dir(const char *root)
{
    int checked = 0;
    DIR *d = opendir(root);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        const char *names[] = { "model.pnnx.param", "model_dyn.pnnx.param" };
        for (int k = 0; k < 2 && e->d_name[0] != '.'; k++) {
            char path[600];
            snprintf(path, sizeof path, "%s/%s/%s", root, e->d_name, names[k]);
            FILE *f = fopen(path, "r");
            if (!f) {
                continue;
            }
            fclose(f);
            ki_graph *g;
            ki_error err;
            if (ki_param_load(path, &g, &err) != KI_OK || ki_graph_build(g, &err) != KI_OK) {
                fail_msg("%s", err.msg);
            }
            assert_topological(g);
            ki_graph_destroy(g);
            checked++;
        }
    }
    if (d) {
        closedir(d);
    }
    return checked;
}

static void test_real_models_sorted(void **state)
{
    (void)state;
    int n = check_dir("tests/data/ops") + check_dir("tests/data/nets");
    assert_true(n >= 40);
    /* the whole shared zoo when it sits beside the repository (as in CI) */
    n += check_dir("../shared/models") + check_dir("../shared/models/ops");
    printf("checked %d real param files\n", n);
}

static void test_seed_graph(void **state)
{
    (void)state;
    ki_graph *g;
    ki_error err;
    assert_int_equal(ki_param_load("tests/data/ops/seed_graph/model.pnnx.param", &g, &err), KI_OK);
    assert_int_equal(ki_graph_build(g, &err), KI_OK);
    const char *want[] = { "pnnx_input_0", "op1", "F.relu_0",    "op3",          "F.sigmoid_1",
                           "op4",          "op5", "pnnx_expr_0", "pnnx_output_0" };
    for (int k = 0; k < 9; k++) {
        assert_string_equal(g->nodes[g->order[k]].desc.name, want[k]);
    }
    assert_int_equal(g->operands[4].n_consumers, 2); /* sigmoid feeds op4 and op5 */
    ki_graph_destroy(g);
}

/* A chain of 100,000 ReLUs written in reverse order: the sort must reorder it without
 * recursion, and a cycle closing the chain must be reported. */
static char *chain_text(int n, int cycle)
{
    size_t cap = (size_t)n * 48 + 256, len = 0;
    char *t = malloc(cap);
    len += (size_t)snprintf(t + len, cap - len, "7767517\n%d %d\n", n + 2, n + 1);
    len += (size_t)snprintf(t + len, cap - len, "pnnx.Output out 1 0 v%d\n", n);
    for (int i = n; i >= 1; i--) {
        len += (size_t)snprintf(t + len, cap - len, "nn.ReLU r%d 1 1 v%d v%d\n", i,
                                (cycle && i == 1) ? n : i - 1, i);
    }
    snprintf(t + len, cap - len, "pnnx.Input in 0 1 %s\n", cycle ? "x" : "v0");
    return t;
}

static void test_long_chain(void **state)
{
    (void)state;
    const int n = 100000;
    char *t = chain_text(n, 0);
    ki_graph *g;
    ki_error err;
    assert_int_equal(ki_param_parse("chain", t, strlen(t), &g, &err), KI_OK);
    assert_int_equal(ki_graph_build(g, &err), KI_OK);
    assert_string_equal(g->nodes[g->order[0]].desc.name, "in");
    assert_string_equal(g->nodes[g->order[1]].desc.name, "r1");
    assert_string_equal(g->nodes[g->order[n]].desc.name, "r100000");
    assert_topological(g);
    ki_graph_destroy(g);
    free(t);
    t = chain_text(n, 1);
    assert_int_equal(ki_param_parse("chain", t, strlen(t), &g, &err), KI_OK);
    assert_int_equal(ki_graph_build(g, &err), KI_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "cycle through op 'r"));
    ki_graph_destroy(g);
    free(t);
}

/* The TorchScript list plumbing of dynamic YOLO exports is folded into plain operators. */
static void test_fold_lists(void **state)
{
    (void)state;
    const char *t = "7767517\n8 8\n"
                    "pnnx.Input in 0 1 0\n"
                    "pnnx.Expression e_ij 0 1 1 expr=ij\n"
                    "torch.arange a 0 1 2 end=4\n"
                    "pnnx.Expression e_list 2 1 2 0 3 expr=[@0,@1]\n"
                    "aten::meshgrid mg 2 1 3 1 4\n"
                    "prim::ListUnpack up 1 2 4 5 6\n"
                    "torch.stack st 2 1 6 5 7 dim=2\n"
                    "pnnx.Output out 1 0 7\n";
    ki_graph *g;
    ki_error err;
    assert_int_equal(ki_param_parse("f", t, strlen(t), &g, &err), KI_OK);
    assert_int_equal(ki_graph_build(g, &err), KI_OK);
    assert_int_equal(g->n_nodes, 5); /* in, arange, meshgrid, stack, out */
    const ki_node *mg = NULL;
    for (int n = 0; n < g->n_nodes; n++) {
        mg = strcmp(g->nodes[n].desc.type, "aten::meshgrid") == 0 ? &g->nodes[n] : mg;
    }
    assert_non_null(mg);
    assert_int_equal(mg->desc.n_inputs, 2);
    assert_string_equal(mg->desc.input_names[0], "2");
    assert_string_equal(mg->desc.input_names[1], "0");
    assert_int_equal(mg->desc.n_outputs, 2);
    assert_string_equal(mg->desc.output_names[1], "6");
    assert_string_equal(ki_op_param(&mg->desc, "indexing")->raw, "ij");
    assert_topological(g);
    ki_graph_destroy(g);
}

/* An index list with a computed element feeding Tensor.index: the element becomes an expression
 * of its own, and Tensor.index takes the tensors with indices_pattern. */
static void test_fold_index_list(void **state)
{
    (void)state;
    const char *t = "7767517\n6 5\n"
                    "pnnx.Input in 0 1 0\n"
                    "pnnx.Input i 0 1 1\n"
                    "pnnx.Input j 0 1 2\n"
                    "pnnx.Expression e 2 1 1 2 3 expr=[remainder(@1,2),None,@0]\n"
                    "Tensor.index ix 2 1 0 3 4 $input=0 $expr=3\n"
                    "pnnx.Output out 1 0 4\n";
    ki_graph *g;
    ki_error err;
    assert_int_equal(ki_param_parse("f", t, strlen(t), &g, &err), KI_OK);
    assert_int_equal(ki_graph_build(g, &err), KI_OK);
    assert_int_equal(g->n_nodes, 6); /* 3 inputs, the element's expression, index, out */
    const ki_node *ix = NULL, *el = NULL;
    for (int n = 0; n < g->n_nodes; n++) {
        const ki_node *nd = &g->nodes[n];
        ix = strcmp(nd->desc.type, "Tensor.index") == 0 ? nd : ix;
        el = strcmp(nd->desc.type, "pnnx.Expression") == 0 ? nd : el;
    }
    assert_non_null(ix);
    assert_non_null(el);
    assert_string_equal(ki_op_param(&el->desc, "expr")->raw, "remainder(@0,2)");
    assert_int_equal(el->desc.n_inputs, 1);
    assert_string_equal(el->desc.input_names[0], "2");
    assert_int_equal(ix->desc.n_inputs, 3);
    assert_string_equal(ix->desc.input_keys[0], "input");
    assert_string_equal(ix->desc.input_names[1], el->desc.output_names[0]);
    assert_string_equal(ix->desc.input_names[2], "1");
    assert_string_equal(ki_op_param(&ix->desc, "indices_pattern")->raw, "TNT");
    assert_topological(g);
    ki_graph_destroy(g);
}

/* n buffers of random lifetimes over `steps` steps and sizes below 5000, planned: 64-byte aligned,
 * inside the total, and no two buffers alive at the same step overlap. */
static void plan_random_round(ki_plan_buf *b, int n, int steps, unsigned *seed, int round)
{
    for (int i = 0; i < n; i++) {
        *seed = *seed * 1103515245u + 12345u;
        b[i].first = (int)((*seed >> 8) % (unsigned)steps) - 1;
        *seed = *seed * 1103515245u + 12345u;
        b[i].last = b[i].first + (int)((*seed >> 8) % 10);
        *seed = *seed * 1103515245u + 12345u;
        b[i].size = (*seed >> 8) % 5000;
    }
    size_t total;
    ki_error err;
    assert_int_equal(ki_plan_offsets(b, n, 64, &total, &err), KI_OK);
    size_t need = 0;
    for (int i = 0; i < n; i++) {
        assert_int_equal(b[i].offset % 64, 0);
        assert_true(b[i].offset + b[i].size <= total);
        need = b[i].size > need ? b[i].size : need;
        for (int j = 0; j < i; j++) {
            bool live = b[i].first <= b[j].last && b[j].first <= b[i].last;
            bool overlap = b[i].size && b[j].size && b[i].offset < b[j].offset + b[j].size &&
                           b[j].offset < b[i].offset + b[i].size;
            if (live && overlap) {
                fail_msg("seed round %d: buffers %d and %d overlap", round, i, j);
            }
        }
    }
    assert_true(total >= need);
}

/* Random lifetimes, placed greedily by size. */
static void test_plan_random(void **state)
{
    (void)state;
    unsigned seed = 12345;
    for (int round = 0; round < 200; round++) {
        ki_plan_buf b[64];
        plan_random_round(b, 1 + (int)(seed % 60), 40, &seed, round);
    }
}

/* More buffers than the greedy placement takes (4096): the best-fit free list. */
static void test_plan_many(void **state)
{
    (void)state;
    unsigned seed = 777;
    const int n = 5000;
    ki_plan_buf *b = malloc((size_t)n * sizeof *b);
    assert_non_null(b);
    plan_random_round(b, n, 3000, &seed, 0);
    free(b);
}

/* Greedy by size, worked by hand: the largest buffer first, each at the lowest offset clear of the
 * placed buffers alive at a step of its own. The large tensors of steps 0-5 (sizes 64, 48, 72)
 * share offset 0, as in mobilenet_v2's first blocks; the model input, alive throughout, goes
 * above them. */
static void test_plan_by_size(void **state)
{
    (void)state;
    ki_plan_buf b[6] = {
        { 64, 0, 1, 0 },  /* A */
        { 32, 1, 2, 0 },  /* B: beside A and C */
        { 48, 2, 3, 0 },  /* C */
        { 16, 3, 5, 0 },  /* D: in the gap between E and the input */
        { 72, 4, 5, 0 },  /* E */
        { 24, -1, 5, 0 }, /* the input */
    };
    const size_t want[6] = { 0, 64, 0, 72, 0, 96 };
    size_t total;
    ki_error err;
    assert_int_equal(ki_plan_offsets(b, 6, 4, &total, &err), KI_OK);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(b[i].offset, want[i]);
    }
    assert_int_equal(total, 120);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_models_sorted), cmocka_unit_test(test_seed_graph),
        cmocka_unit_test(test_long_chain),         cmocka_unit_test(test_fold_lists),
        cmocka_unit_test(test_fold_index_list),    cmocka_unit_test(test_plan_random),
        cmocka_unit_test(test_plan_by_size),       cmocka_unit_test(test_plan_many),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
