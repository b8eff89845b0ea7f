/* classify.c - the C API in about twenty lines: load a model, run one input, print the top class.
 * Build: cc classify.c $(pkg-config --cflags --libs kinfer) -o classify
 * Run:   ./classify model.pnnx.param model.pnnx.bin */
#include <kinfer.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    ki_model *m;
    ki_session *s;
    ki_error err;
    if (argc < 3 || ki_model_load(argv[1], argv[2], NULL, &m, &err) != KI_OK) {
        fprintf(stderr, "%s\n", argc < 3 ? "usage: classify MODEL.param MODEL.bin" : err.msg);
        return 1;
    }
    ki_shape in = ki_model_input_decl(m, 0); /* the declared input shape, e.g. (1,1,28,28) */
    ki_session_options opt = { 2, 0 };       /* two threads, no memory limit */
    if (ki_session_create(m, &in, 1, &opt, &s, &err) != KI_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    ki_tensor x = ki_session_input(s, 0);
    for (int64_t i = 0; i < ki_shape_count(&x.shape); i++) {
        x.data[i] = 0.5f; /* fill with your data */
    }
    if (ki_session_run(s, &err) != KI_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    ki_tensor y = ki_session_output(s, 0);
    int64_t best = 0;
    for (int64_t i = 1; i < ki_shape_count(&y.shape); i++) {
        best = y.data[i] > y.data[best] ? i : best;
    }
    printf("class %lld (score %g)\n", (long long)best, y.data[best]);
    ki_session_destroy(s);
    ki_model_destroy(m);
    return 0;
}
