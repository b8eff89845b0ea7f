/* test_cli.c - the kinfer binary end to end: the README's sample, --save-dir round trip
 * (image preprocessing written as in0.npy gives the same outputs when fed back), exit codes. */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "../../cli/npy.h"

#include <stb_image.h>

static char kinfer[600];

/* Runs a shell command line with kinfer substituted for %K; returns the exit status and the
 * captured stdout in out (if given). */
static int run(const char *fmt, const char *arg, char *out, size_t n)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, fmt, kinfer, arg ? arg : "");
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t got = 0;
    char sink[4096];
    char *dst = out ? out : sink;
    size_t cap = out ? n : sizeof sink;
    for (;;) {
        size_t r = fread(dst + (out ? got : 0), 1, cap - 1 - (out ? got : 0), p);
        if (r == 0) {
            break;
        }
        got += r;
        if (out && got >= n - 1) {
            break;
        }
    }
    if (out) {
        out[got] = '\0';
    }
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#define SAMPLE "samples/mnist_cnn/model.pnnx.param samples/mnist_cnn/model.pnnx.bin "

/* The README's main command: every bundled digit is classified as itself. */
static void test_sample_digits(void **state)
{
    (void)state;
    char out[16384];
    assert_int_equal(
        run("%s run " SAMPLE "samples/digits --topk 1 --json%s", NULL, out, sizeof out), 0);
    for (int d = 0; d < 10; d++) {
        char want[128];
        snprintf(want, sizeof want, "digit_%d.png\", \"index\": %d, \"top\": [{\"class\": %d,", d,
                 d, d);
        if (!strstr(out, want)) {
            fail_msg("digit %d not recognised; output:\n%s", d, out);
        }
    }
}

static void test_save_dir_round_trip(void **state)
{
    (void)state;
    char dir[] = "/tmp/kinfer-cli-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%%s run " SAMPLE "samples/digits/digit_3.png --save-dir %s/a%%s",
             dir);
    assert_int_equal(run(cmd, NULL, NULL, 0), 0);
    snprintf(cmd, sizeof cmd, "%%s run " SAMPLE "%s/a/in0.npy --save-dir %s/b%%s", dir, dir);
    assert_int_equal(run(cmd, NULL, NULL, 0), 0);
    snprintf(cmd, sizeof cmd, "cmp %s/a/out0.npy %s/b/out0.npy && cmp %s/a/in0.npy %s/b/in0.npy",
             dir, dir, dir, dir);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* --csv: a header, then one row per class shown; each digit is its own top class. */
static void test_csv(void **state)
{
    (void)state;
    char out[16384];
    assert_int_equal(
        run("%s run " SAMPLE "samples/digits --topk 1 --csv 2>/dev/null%s", NULL, out, sizeof out),
        0);
    assert_memory_equal(out, "input,index,rank,class,score,logit,label\n", 41);
    for (int d = 0; d < 10; d++) {
        char want[128];
        snprintf(want, sizeof want, "samples/digits/digit_%d.png,%d,1,%d,", d, d, d);
        if (!strstr(out, want)) {
            fail_msg("no row '%s' in:\n%s", want, out);
        }
    }
    assert_int_equal(run("%s run " SAMPLE "samples/digits --csv --json 2>/dev/null%s", NULL, NULL,
                         0),
                     2);
}

/* bench without a .bin generates weights a YOLOv5 Detect head accepts, for the older export
 * too, whose captured constants @pnnx_0..6 are six (1, na, ny, nx, 2) grids and the strides. */
static void test_bench_old_detect(void **state)
{
    (void)state;
    assert_int_equal(run("%s bench tests/data/bench/yolov5_old_detect.pnnx.param --runs 1 "
                         "> /dev/null 2>&1%s",
                         NULL, NULL, 0),
                     0);
}

/* A YOLOv8-layout output (N, 4 + classes, boxes; no objectness) is recognised by its shape and
 * goes through the detector post-processing: the detections equal torchvision's batched_nms at
 * conf 0.25 and IoU 0.7 (tests/data/detect/make_cases.py), in the same order. */
#define V8 "tests/data/detect/yolov8_layout/"

static void test_yolov8_layout(void **state)
{
    (void)state;
    static char out[65536];
    assert_int_equal(run("%s run " V8 "model.pnnx.param " V8 "model.pnnx.bin " V8
                         "in0.npy --json 2>/dev/null%s",
                         NULL, out, sizeof out),
                     0);
    assert_non_null(strstr(out, "\"task\": \"detect\""));
    ki_shape s;
    float *want = NULL;
    ki_error err;
    assert_int_equal(ki_npy_read(V8 "expected_dets.npy", &s, &want, &err), KI_OK);
    const char *p = out;
    int64_t i = 0;
    for (; (p = strstr(p, "{\"class\": ")) != NULL; i++, p++) {
        assert_true(i < s.d[0]);
        const float *w = want + i * 6;
        char *q;
        long cls = strtol(p + 10, &q, 10);
        const char *sc = strstr(p, "\"score\": "), *bx = strstr(p, "\"box\": [");
        assert_non_null(sc);
        assert_non_null(bx);
        double score = strtod(sc + 9, NULL), box[4];
        q = (char *)bx + 8;
        for (int k = 0; k < 4; k++) {
            box[k] = strtod(q, &q);
            q += *q == ',' ? 1 : 0;
        }
        bool ok = cls == (long)w[0] && fabs(score - w[1]) < 1e-4;
        for (int k = 0; k < 4; k++) {
            ok = ok && fabs(box[k] - w[2 + k]) < 0.051;
        }
        if (!ok) {
            fail_msg("detection %lld: class %ld score %.4f box %.1f %.1f %.1f %.1f; torchvision: "
                     "%g %.4f %.1f %.1f %.1f %.1f",
                     (long long)i, cls, score, box[0], box[1], box[2], box[3], (double)w[0],
                     (double)w[1], (double)w[2], (double)w[3], (double)w[4], (double)w[5]);
        }
    }
    assert_int_equal(i, s.d[0]);
    free(want);
}

/* A segmenter's output (N, classes, H, W at the input's H x W) is recognised: each class's share
 * of the pixels and the --mask palette PNG follow the argmax of PyTorch's own output
 * (tests/data/segment/make_cases.py); the PNG, read back with stb_image, holds the VOC colours
 * (class 1 (128,0,0), 2 (0,128,0), 3 (128,128,0), 4 (0,0,128), 0 black). */
#define SEG "tests/data/segment/tiny/"

static void test_segment(void **state)
{
    (void)state;
    static const unsigned char voc[5][3] = {
        { 0, 0, 0 }, { 128, 0, 0 }, { 0, 128, 0 }, { 128, 128, 0 }, { 0, 0, 128 }
    };
    char out[8192], dir[] = "/tmp/kinfer-seg-XXXXXX", cmd[1024], png[600];
    assert_non_null(mkdtemp(dir));
    snprintf(png, sizeof png, "%s/m.png", dir);
    snprintf(cmd, sizeof cmd,
             "%%s run " SEG "model.pnnx.param " SEG "model.pnnx.bin " SEG
             "in0.npy --json --topk 5 --mask %s 2>/dev/null%%s",
             png);
    assert_int_equal(run(cmd, NULL, out, sizeof out), 0);
    assert_non_null(strstr(out, "\"task\": \"segment\""));
    ki_shape s;
    float *y = NULL;
    ki_error err;
    assert_int_equal(ki_npy_read(SEG "out0.npy", &s, &y, &err), KI_OK);
    const int64_t c = s.d[1], hw = s.d[2] * s.d[3];
    int *cls = malloc((size_t)hw * sizeof *cls), count[5] = { 0 };
    for (int64_t p = 0; p < hw; p++) {
        cls[p] = 0;
        for (int64_t k = 1; k < c; k++) {
            cls[p] = y[k * hw + p] > y[cls[p] * hw + p] ? (int)k : cls[p];
        }
        count[cls[p]]++;
    }
    for (int k = 0; k < 5; k++) {
        char want[64];
        snprintf(want, sizeof want, "{\"class\": %d, \"fraction\": %.6f}", k,
                 (double)count[k] / (double)hw);
        if (count[k] && !strstr(out, want)) {
            fail_msg("no '%s' in:\n%s", want, out);
        }
    }
    int w, h, comp;
    unsigned char *rgb = stbi_load(png, &w, &h, &comp, 3);
    assert_non_null(rgb);
    assert_int_equal(w, s.d[3]);
    assert_int_equal(h, s.d[2]);
    for (int64_t p = 0; p < hw; p++) {
        assert_memory_equal(rgb + 3 * p, voc[cls[p]], 3);
    }
    stbi_image_free(rgb);
    /* from an image: the mask and the overlay at the image's own size */
    snprintf(cmd, sizeof cmd,
             "%%s run " SEG "model.pnnx.param " SEG "model.pnnx.bin samples/digits/digit_3.png "
             "--mask %s/i.png --draw %s/o.png > /dev/null 2>&1%%s",
             dir, dir);
    assert_int_equal(run(cmd, NULL, NULL, 0), 0);
    for (int i = 0; i < 2; i++) {
        snprintf(png, sizeof png, "%s/%s.png", dir, i ? "o" : "i");
        assert_true(stbi_info(png, &w, &h, &comp));
        assert_int_equal(w, 28);
        assert_int_equal(h, 28);
    }
    free(cls);
    free(y);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* Runs `kinfer run ARGS --save-dir TMP` (exit 0 required), reads TMP/saved into *got and ref_npy
 * into *ref, and removes TMP. */
static void run_saved(const char *args, const char *saved, const char *ref_npy, ki_shape *sg,
                      float **got, ki_shape *sr, float **ref)
{
    char dir[] = "/tmp/kinfer-saved-XXXXXX", cmd[1024], path[600];
    ki_error err;
    assert_non_null(mkdtemp(dir));
    snprintf(cmd, sizeof cmd, "%%s run %s --save-dir %s > /dev/null 2>&1%%s", args, dir);
    assert_int_equal(run(cmd, NULL, NULL, 0), 0);
    snprintf(path, sizeof path, "%s/%s", dir, saved);
    assert_int_equal(ki_npy_read(path, sg, got, &err), KI_OK);
    assert_int_equal(ki_npy_read(ref_npy, sr, ref, &err), KI_OK);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* --tokens: a text model's input given as ids on the command line is the int64 .npy's first row,
 * and the saved output equals PyTorch's first row (tests/data/ops/embedding, dynamic export). */
static void test_tokens(void **state)
{
    (void)state;
    ki_shape sg, sr;
    float *got = NULL, *ref = NULL;
    run_saved("tests/data/ops/embedding/model_dyn.pnnx.param tests/data/ops/embedding/model.pnnx.bin "
              "--tokens 20,38,24,47,2,18,17,28,43",
              "out0.npy", "tests/data/ops/embedding/out0.npy", &sg, &got, &sr, &ref);
    assert_int_equal(sg.d[0], 1);
    const int64_t n = ki_shape_count(&sg);
    assert_int_equal(n * sr.d[0], ki_shape_count(&sr));
    for (int64_t i = 0; i < n; i++) {
        assert_true(fabsf(got[i] - ref[i]) <= 1e-5f * (1.0f + fabsf(ref[i])));
    }
    free(got);
    free(ref);
    /* ids out of range, and files given beside --tokens: usage errors */
    assert_int_equal(run("%s run " SAMPLE "--tokens 1,-2 2>/dev/null%s", NULL, NULL, 0), 2);
    assert_int_equal(run("%s run " SAMPLE "x.npy --tokens 1 2>/dev/null%s", NULL, NULL, 0), 2);
}

/* Image preprocessing as torchvision does it to a PIL image (tests/data/preprocess/make_refs.py):
 * `kinfer run --save-dir` writes the input the model saw, and it must equal torchvision's tensor
 * within 1e-5 — Resize(256) + CenterCrop(224) + ImageNet Normalize on both sample photos, from
 * the JPEG files themselves (cli/jpeg.c decodes them as Pillow does) and from their pixels stored
 * as PNG, and an exact --resize WxH with --crop and --bgr. */
#define CONVPATHS "tests/data/nets/convpaths/model.pnnx.param tests/data/nets/convpaths/model.pnnx.bin "
#define PREP "tests/data/preprocess/"

static void check_input_matches(const char *options, const char *ref_npy)
{
    char args[512];
    ki_shape sg, sr;
    float *got = NULL, *ref = NULL;
    snprintf(args, sizeof args, CONVPATHS "%s", options);
    run_saved(args, "in0.npy", ref_npy, &sg, &got, &sr, &ref);
    assert_true(ki_shape_equal(&sg, &sr));
    double worst = 0;
    for (int64_t i = 0; i < ki_shape_count(&sr); i++) {
        double d = fabs((double)got[i] - (double)ref[i]);
        worst = d > worst ? d : worst;
    }
    free(got);
    free(ref);
    if (worst > 1e-5) {
        fail_msg("%s: max abs difference %.3g from torchvision (%s)", options, worst, ref_npy);
    }
}

static void test_preprocess_torchvision(void **state)
{
    (void)state;
    check_input_matches(PREP "bus.jpg --preprocess torchvision", PREP "bus_torchvision.npy");
    check_input_matches(PREP "zidane.jpg --preprocess torchvision", PREP "zidane_torchvision.npy");
    check_input_matches(PREP "bus.png --preprocess torchvision", PREP "bus_torchvision.npy");
    check_input_matches(PREP "zidane.png --preprocess torchvision", PREP "zidane_torchvision.npy");
    /* the same by hand */
    check_input_matches(PREP "bus.png --resize 256 --crop 224x224 --imagenet",
                        PREP "bus_torchvision.npy");
    check_input_matches(PREP "zidane.png --resize=320x240 --crop 224 --bgr",
                        PREP "zidane_320x240_bgr.npy");
    /* a crop that is not the input's size, a bad size, a detector-only clash: usage errors */
    assert_int_equal(run("%s run " CONVPATHS PREP "bus.png --crop 200 2>/dev/null%s", NULL, NULL, 0),
                     2);
    assert_int_equal(
        run("%s run " CONVPATHS PREP "bus.png --resize 0x5 2>/dev/null%s", NULL, NULL, 0), 2);
    assert_int_equal(
        run("%s run " CONVPATHS PREP "bus.png --preprocess caffe 2>/dev/null%s", NULL, NULL, 0), 2);
}

/* A classifier whose graph ends in softmax shows its outputs as the probabilities (PyTorch's own,
 * tests/data/ops/softmax_head/out0.npy), not a softmax of them; after log_softmax their exp;
 * --scores softmax applies one anyway, --scores raw shows the values. */
#define HEAD(n) "tests/data/ops/" n "/model.pnnx.param tests/data/ops/" n "/model.pnnx.bin " \
                "tests/data/ops/" n "/in0.npy "

static void check_top_score(const char *out, const char *npy, bool take_exp)
{
    ki_shape s;
    float *ref = NULL, best = -1e30f;
    ki_error err;
    assert_int_equal(ki_npy_read(npy, &s, &ref, &err), KI_OK);
    for (int64_t i = 0; i < ki_shape_count(&s); i++) {
        best = ref[i] > best ? ref[i] : best;
    }
    free(ref);
    const char *p = strstr(out, "\"score\": ");
    assert_non_null(p);
    double got = strtod(p + 9, NULL), want = take_exp ? exp(best) : best;
    if (fabs(got - want) > 2e-6) {
        fail_msg("%s: top score %.7f, PyTorch's %.7f", npy, got, want);
    }
}

static void test_scores(void **state)
{
    (void)state;
    char out[8192];
    assert_int_equal(run("%s run " HEAD("softmax_head") "--json%s", NULL, out, sizeof out), 0);
    check_top_score(out, "tests/data/ops/softmax_head/out0.npy", false);
    assert_int_equal(run("%s run " HEAD("log_softmax_head") "--json%s", NULL, out, sizeof out), 0);
    check_top_score(out, "tests/data/ops/log_softmax_head/out0.npy", true);
    assert_int_equal(
        run("%s run " HEAD("softmax_head") "--json --scores raw%s", NULL, out, sizeof out), 0);
    check_top_score(out, "tests/data/ops/softmax_head/out0.npy", false);
    /* a second softmax over probabilities flattens them: the top one must drop */
    assert_int_equal(
        run("%s run " HEAD("softmax_head") "--json --scores softmax%s", NULL, out, sizeof out), 0);
    const char *p = strstr(out, "\"score\": ");
    assert_non_null(p);
    assert_true(strtod(p + 9, NULL) < 0.25);
    assert_int_equal(run("%s run " HEAD("softmax_head") "--scores odd 2>/dev/null%s", NULL, NULL, 0),
                     2);
}

/* Option errors name the option, the value and what it allows, suggest the closest option, and
 * exit 2; --opt=value works; a missing image says it cannot be opened. */
static void test_option_messages(void **state)
{
    (void)state;
    static const char *const cases[][3] = {
        { "run " SAMPLE "samples/digits --threads 0", "--threads '0'", "1 to 1024" },
        { "run " SAMPLE "samples/digits --conf 2", "--conf '2'", "from 0 to 1" },
        { "run " SAMPLE "samples/digits --topk 0", "--topk '0'", "1 to 1000000" },
        { "run " SAMPLE "samples/digits --tpok 3", "unknown option '--tpok'", "'--topk'" },
        { "run " SAMPLE "samples/digits --json=1", "--json takes no value", "" },
        { "run " SAMPLE "samples/digits --threads", "--threads needs a value", "" },
        { "bench samples/mnist_cnn/model.pnnx.param --runs 0", "--runs '0'", "1 to 1000000" },
        { "bench samples/mnist_cnn/model.pnnx.param --thread 2", "did you mean '--threads'", "" },
    };
    char out[4096], cmd[1024];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(cmd, sizeof cmd, "%%s %s 2>&1%%s", cases[i][0]);
        assert_int_equal(run(cmd, NULL, out, sizeof out), 2);
        if (!strstr(out, cases[i][1]) || !strstr(out, cases[i][2])) {
            fail_msg("'%s' said: %s", cases[i][0], out);
        }
    }
    assert_int_equal(run("%s run " SAMPLE "samples/digits/digit_7.png --topk=1 --threads=1%s", NULL,
                         out, sizeof out),
                     0);
    assert_non_null(strstr(out, "1. class 7"));
    assert_int_equal(run("%s run " SAMPLE "no-such.png 2>&1%s", NULL, out, sizeof out), 1);
    assert_non_null(strstr(out, "no-such.png: cannot open: No such file"));
}

/* dump-graph --dot - writes only Graphviz text; an operator kinfer does not run is marked. */
static void test_dump_graph(void **state)
{
    (void)state;
    char out[16384], dir[] = "/tmp/kinfer-graph-XXXXXX", cmd[1024];
    assert_int_equal(run("%s dump-graph samples/mnist_cnn/model.pnnx.param --dot -%s", NULL, out,
                         sizeof out),
                     0);
    assert_int_equal(strncmp(out, "digraph kinfer {", 16), 0);
    assert_null(strstr(out, "# samples"));
    assert_non_null(mkdtemp(dir));
    snprintf(cmd, sizeof cmd,
             "printf '7767517\\n3 2\\npnnx.Input in 0 1 0\\nfoo.Bar b 1 1 0 1\\n"
             "pnnx.Output out 1 0 1\\n' > %s/m.param",
             dir);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%%s dump-graph %s/m.param%%s", dir);
    assert_int_equal(run(cmd, NULL, out, sizeof out), 0);
    assert_non_null(strstr(out, "foo.Bar"));
    assert_non_null(strstr(out, "[unsupported]"));
    assert_null(strstr(strstr(out, "pnnx.Input"), "pnnx.Input                 [unsupported]"));
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* Output options are checked before any work: --save-dir is created with its parents; a --draw
 * into a missing directory or with an extension kinfer does not write, and --imagenet on a
 * 1-channel model, are usage errors naming the option; a labels file of the wrong length and
 * --draw on a classifier are warned about. */
static void test_preflight(void **state)
{
    (void)state;
    char out[8192], dir[] = "/tmp/kinfer-pre-XXXXXX", cmd[1024];
    assert_non_null(mkdtemp(dir));
    snprintf(cmd, sizeof cmd,
             "%%s run " SAMPLE "samples/digits/digit_2.png --save-dir %s/x/y/z 2>&1%%s", dir);
    assert_int_equal(run(cmd, NULL, out, sizeof out), 0);
    snprintf(cmd, sizeof cmd, "test -s %s/x/y/z/out0.npy", dir);
    assert_int_equal(system(cmd), 0);
    static const char *const bad[][2] = {
        { "--draw /no/such/dir/boxes.jpg", "--draw /no/such/dir/boxes.jpg: directory" },
        { "--draw boxes.webp", "must end in .jpg" },
        { "--imagenet", "--imagenet: the model's input has 1 channel" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "%%s run " SAMPLE "samples/digits/digit_2.png %s 2>&1%%s",
                 bad[i][0]);
        assert_int_equal(run(cmd, NULL, out, sizeof out), 2);
        if (!strstr(out, bad[i][1])) {
            fail_msg("'%s' said: %s", bad[i][0], out);
        }
    }
    assert_int_equal(run("%s run " SAMPLE "samples/digits/digit_2.png --labels "
                         "samples/imagenet.names 2>&1%s",
                         NULL, out, sizeof out),
                     0);
    assert_non_null(strstr(out, "has 1000 names but the model has 10 classes"));
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* info: mnist_cnn's counts by hand: 2 convs (1->16 3x3 at 28x28, 16->32 3x3 at 14x14) and 2
 * linear layers (1568->64, 64->10) are 1,117,056 multiply-adds, 0.002234 GFLOPs; 105,866
 * parameters; an unknown operator type is listed and makes the exit status 1. */
static void test_info(void **state)
{
    (void)state;
    char out[8192];
    assert_int_equal(run("%s info samples/mnist_cnn/model.pnnx.param --json%s", NULL, out,
                         sizeof out),
                     0);
    assert_non_null(strstr(out, "\"parameters\":105866,"));
    assert_non_null(strstr(out, "\"gflops\":0.0022,"));
    assert_non_null(strstr(out, "\"nn.Conv2d\":2"));
    assert_non_null(strstr(out, "\"unsupported\":[]"));
    assert_non_null(strstr(out, "\"shape\":\"(1,1,28,28)\""));
    assert_int_equal(run("%s info samples/mnist_cnn/model.pnnx.param%s", NULL, out, sizeof out),
                     0);
    assert_non_null(strstr(out, "GFLOPs: 0.002 at the declared shapes"));
    assert_int_equal(run("%s info samples/mnist_cnn/model.pnnx.param --input-shape 2,1,28,28 "
                         "--json%s",
                         NULL, out, sizeof out),
                     0);
    assert_non_null(strstr(out, "\"gflops\":0.0045,"));
    assert_int_equal(run("printf '7767517\\n3 2\\npnnx.Input in 0 1 0\\nfoo.Bar b 1 1 0 1\\n"
                         "pnnx.Output out 1 0 1\\n' > /tmp/kinfer-info-test.param && %s info "
                         "/tmp/kinfer-info-test.param%s",
                         NULL, out, sizeof out),
                     1);
    assert_non_null(strstr(out, "foo.Bar"));
    assert_non_null(strstr(out, "[unsupported]"));
    remove("/tmp/kinfer-info-test.param");
}

/* `info --json`'s GFLOPs of a one-operator graph: its input declarations (n_in of them, named 0..)
 * and the operator line given. */
static void info_gflops_at(int n_in, const char *const *in_decl, const char *op, const char *opts,
                           const char *want);
static void info_gflops(int n_in, const char *const *in_decl, const char *op, const char *want)
{
    info_gflops_at(n_in, in_decl, op, "", want);
}

/* The same with more options for info (e.g. --input-shape: the model is then loaded, with
 * generated weights, and each step counted as the session runs it). */
static void info_gflops_at(int n_in, const char *const *in_decl, const char *op, const char *opts,
                           const char *want)
{
    const char *path = "/tmp/kinfer-flops-test.param";
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    int more = 0; /* operators in op past its first (one line each, each one more operand) */
    for (const char *c = op; (c = strchr(c, '\n')) != NULL; c++) {
        more++;
    }
    fprintf(f, "7767517\n%d %d\n", n_in + 2 + more, n_in + 1 + more);
    for (int i = 0; i < n_in; i++) {
        fprintf(f, "pnnx.Input in%d 0 1 %d #%d=%s\n", i, i, i, in_decl[i]);
    }
    fprintf(f, "%s\npnnx.Output out 1 0 9\n", op);
    fclose(f);
    char out[8192], cmd[256];
    snprintf(cmd, sizeof cmd, "%%s info %s %s --json%%s", path, opts);
    assert_int_equal(run(cmd, NULL, out, sizeof out), 0);
    if (!strstr(out, want)) {
        fail_msg("%s: want %s in %s", op, want, out);
    }
    remove(path);
}

/* FLOPs of the operators beyond convolutions and linear layers, each counted by hand (2 x the
 * multiply-adds): multi-head attention (projections, scores, weighted values), its attn_mask not
 * taken for the key; LSTM (every weight matrix once per time step); YOLOv5's Detect head (its
 * three 1x1 convolutions); Conv1d, Conv3d and ConvTranspose1d. The attention, convolution and
 * fused counts also equal PyTorch's (1.13) mm / addmm / bmm / baddbmm / convolution calls for the
 * same modules, counted by a dispatch mode. */
static void test_info_flops(void **state)
{
    (void)state;
    /* self-attention, E 256, L = S = 512: 2*512*256^2 + 512*256*512 + 2*512*512*256 */
    const char *mha_in[] = { "(1,512,256)f32" };
    info_gflops(1, mha_in,
                "nn.MultiheadAttention a 1 1 0 9 batch_first=True embed_dim=256 kdim=256 "
                "num_heads=4 vdim=256 @in_proj_bias=(768)f32 @in_proj_weight=(768,256)f32 "
                "@out_proj.bias=(256)f32 @out_proj.weight=(256,256)f32 #0=(1,512,256)f32 "
                "#9=(1,512,256)f32",
                "\"gflops\":0.5369,");
    /* query (100, 2, 64), mask (100, 300) second, key and value (300, 2, 64): per batch item
     * 2*100*64^2 + 300*64*128 + 2*100*300*64 = 7,116,800, x 2 items x 2 = 28,467,200 */
    const char *cross_in[] = { "(100,2,64)f32", "(300,2,64)f32", "(300,2,64)f32",
                               "(100,300)f32" };
    info_gflops(4, cross_in,
                "nn.MultiheadAttention a 4 1 0 3 1 2 9 embed_dim=64 kdim=64 num_heads=4 vdim=64 "
                "$attn_mask=3 @in_proj_bias=(192)f32 @in_proj_weight=(192,64)f32 "
                "@out_proj.bias=(64)f32 @out_proj.weight=(64,64)f32 #0=(100,2,64)f32 "
                "#3=(100,300)f32 #1=(300,2,64)f32 #2=(300,2,64)f32 #9=(100,2,64)f32",
                "\"gflops\":0.0285,");
    /* 1000 steps x (512 x 64 + 512 x 128) */
    const char *lstm_in[] = { "(1,1000,64)f32" };
    info_gflops(1, lstm_in,
                "nn.LSTM l 1 1 0 9 batch_first=True bias=True bidirectional=False hidden_size=128 "
                "input_size=64 num_layers=1 proj_size=0 @bias_hh_l0=(512)f32 @bias_ih_l0=(512)f32 "
                "@weight_hh_l0=(512,128)f32 @weight_ih_l0=(512,64)f32 #0=(1,1000,64)f32 "
                "#9=(1,1000,128)f32",
                "\"gflops\":0.1966,");
    /* 6400*128*255 + 1600*256*255 + 400*512*255 = 365,568,000 */
    const char *det_in[] = { "(1,128,80,80)f32", "(1,256,40,40)f32", "(1,512,20,20)f32" };
    info_gflops(3, det_in,
                "models.yolo.Detect d 3 1 0 1 2 9 @anchors=(3,3,2)f32 @m.0.bias=(255)f32 "
                "@m.0.weight=(255,128,1,1)f32 @m.1.bias=(255)f32 @m.1.weight=(255,256,1,1)f32 "
                "@m.2.bias=(255)f32 @m.2.weight=(255,512,1,1)f32 @pnnx_00=(3)f32 "
                "#0=(1,128,80,80)f32 #1=(1,256,40,40)f32 #2=(1,512,20,20)f32 #9=(1,25200,85)f32",
                "\"gflops\":0.7311,");
    /* 64 x 1000 outputs x 32 x 3 */
    const char *c1_in[] = { "(1,32,1002)f32" };
    info_gflops(1, c1_in,
                "nn.Conv1d c 1 1 0 9 bias=False dilation=(1) groups=1 in_channels=32 "
                "kernel_size=(3) out_channels=64 padding=(0) padding_mode=zeros stride=(1) "
                "@weight=(64,32,3)f32 #0=(1,32,1002)f32 #9=(1,64,1000)f32",
                "\"gflops\":0.0123,");
    /* 32 x 16 x 32 x 32 outputs x 16 x 27 */
    const char *c3_in[] = { "(1,16,16,32,32)f32" };
    info_gflops(1, c3_in,
                "nn.Conv3d c 1 1 0 9 bias=False dilation=(1,1,1) groups=1 in_channels=16 "
                "kernel_size=(3,3,3) out_channels=32 padding=(1,1,1) padding_mode=zeros "
                "stride=(1,1,1) @weight=(32,16,3,3,3)f32 #0=(1,16,16,32,32)f32 "
                "#9=(1,32,16,32,32)f32",
                "\"gflops\":0.4530,");
    /* 32 x 500 inputs, each to 16 channels x 4 taps */
    const char *t1_in[] = { "(1,32,500)f32" };
    info_gflops(1, t1_in,
                "nn.ConvTranspose1d t 1 1 0 9 bias=False dilation=(1) groups=1 in_channels=32 "
                "kernel_size=(4) out_channels=16 output_padding=(0) padding=(0) stride=(2) "
                "@weight=(32,16,4)f32 #0=(1,32,500)f32 #9=(1,16,1002)f32",
                "\"gflops\":0.0020,");
    /* a 1x1 layer and the stride-2 depthwise layer it absorbs (their 4.8 MB between them is
     * never written): one step, counted by the layer with both its parts, at the given shape as
     * at the declared one: 96 x 112^2 x 16 + 96 x 56^2 x 9 = 21,977,088 */
    const char *pwdw_in[] = { "(1,16,112,112)f32" };
    const char *pwdw = "nn.Conv2d pw 1 1 0 1 bias=True dilation=(1,1) groups=1 in_channels=16 "
                       "kernel_size=(1,1) out_channels=96 padding=(0,0) padding_mode=zeros "
                       "stride=(1,1) @bias=(96)f32 @weight=(96,16,1,1)f32 #0=(1,16,112,112)f32 "
                       "#1=(1,96,112,112)f32\n"
                       "nn.Conv2d dw 1 1 1 9 bias=True dilation=(1,1) groups=96 in_channels=96 "
                       "kernel_size=(3,3) out_channels=96 padding=(1,1) padding_mode=zeros "
                       "stride=(2,2) @bias=(96)f32 @weight=(96,1,3,3)f32 #1=(1,96,112,112)f32 "
                       "#9=(1,96,56,56)f32";
    info_gflops(1, pwdw_in, pwdw, "\"gflops\":0.0440,");
    info_gflops_at(1, pwdw_in, pwdw, "--input-shape 1,16,112,112", "\"gflops\":0.0440,");
    char out[8192];
    FILE *f = fopen("/tmp/kinfer-flops-test.param", "w");
    assert_non_null(f);
    fprintf(f, "7767517\n4 3\npnnx.Input in0 0 1 0 #0=(1,16,112,112)f32\n%s\n"
               "pnnx.Output out 1 0 9\n", pwdw);
    fclose(f);
    assert_int_equal(run("%s bench /tmp/kinfer-flops-test.param --runs 1 --warmup 0 --threads 1 "
                         "--profile --json%s",
                         NULL, out, sizeof out),
                     0);
    /* the two layers ran as one step (the band kernels are vector code: at the generic level,
     * e.g. under cross-test, the layers run apart and the counts above are each layer's) */
    if (strstr(out, "\"isa\":\"generic\"")) {
        assert_non_null(strstr(out, "\"name\":\"dw\""));
    } else {
        assert_non_null(strstr(out, "+depthwise bands"));
        assert_null(strstr(out, "\"name\":\"dw\""));
        /* the per-kernel table: the one step under its kernel */
        assert_non_null(strstr(out, "\"kernels\":[{\"kernel\":\"1x1+depthwise bands"));
    }
    /* the per-type table with the FLOPs' rate of the convolutions */
    assert_non_null(strstr(out, "\"types\":[{\"type\":\"nn.Conv2d\",\"count\":"));
    assert_non_null(strstr(out, "\"total_ms\":"));
    const char *g = strstr(out, "\"types\":[");
    assert_non_null(g);
    assert_non_null(strstr(g, "\"gflops\":"));
    remove("/tmp/kinfer-flops-test.param");
}

/* Streaming: ten digits in batches of 3 give ten JSON lines in input order, every digit
 * recognised; --json stays one document; --save-dir names each batch's files; the last stderr
 * line is the summary. */
static void test_streaming(void **state)
{
    (void)state;
    char out[16384], want[128], dir[] = "/tmp/kinfer-stream-XXXXXX", cmd[1024];
    assert_int_equal(run("%s run " SAMPLE "samples/digits --batch 3 --topk 1 --jsonl 2>/dev/null%s",
                         NULL, out, sizeof out),
                     0);
    int lines = 0;
    for (const char *p = out; (p = strchr(p, '\n')) != NULL; p++) {
        lines++;
    }
    assert_int_equal(lines, 10);
    for (int d = 0; d < 10; d++) {
        snprintf(want, sizeof want, "digit_%d.png\", \"index\": %d, \"top\": [{\"class\": %d,", d,
                 d, d);
        assert_non_null(strstr(out, want));
    }
    assert_int_equal(
        run("%s run " SAMPLE "samples/digits --batch 4 --json 2>/dev/null%s", NULL, out, sizeof out),
        0);
    assert_int_equal(out[0], '{');
    assert_non_null(strstr(out, "\"index\": 9"));
    assert_null(strstr(out, "}]},\n  ]"));         /* no comma after the last result */
    assert_non_null(strstr(out, "]}\n  ]\n}\n")); /* closed once, at the end */
    assert_non_null(mkdtemp(dir));
    snprintf(cmd, sizeof cmd,
             "%%s run " SAMPLE "samples/digits --batch 4 --save-dir %s 2>&1 >/dev/null%%s", dir);
    assert_int_equal(run(cmd, NULL, out, sizeof out), 0);
    assert_non_null(strstr(out, "kinfer: 10 inputs in "));
    assert_non_null(strstr(out, "images/s, per batch mean"));
    snprintf(cmd, sizeof cmd, "test -s %s/out0_b0.npy && test -s %s/out0_b2.npy && test ! -e "
             "%s/out0_b3.npy && test -s %s/in0_b1.npy", dir, dir, dir, dir);
    assert_int_equal(system(cmd), 0);
    /* a saved batch of four fed back as one .npy: its summary counts the four items */
    snprintf(cmd, sizeof cmd, "%%s run " SAMPLE "%s/in0_b0.npy 2>&1 >/dev/null%%s", dir);
    assert_int_equal(run(cmd, NULL, out, sizeof out), 0);
    assert_non_null(strstr(out, "kinfer: 1 input (4 items) in "));
    assert_non_null(strstr(out, " items/s, per batch mean"));
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* Inputs: directories recursively in sorted order (other files named on stderr as skipped),
 * @FILE lists, and - for paths on standard input. */
static void test_inputs(void **state)
{
    (void)state;
    char out[8192], dir[] = "/tmp/kinfer-in-XXXXXX", cmd[2048];
    assert_non_null(mkdtemp(dir));
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/a/b && cp samples/digits/digit_4.png %s/a/b/ && cp "
             "samples/digits/digit_5.png %s/a/ && echo x > %s/notes.txt && "
             "printf 'samples/digits/digit_6.png\\n\\nsamples/digits/digit_7.png\\n' > %s/l.txt",
             dir, dir, dir, dir, dir);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%%s run " SAMPLE "%s --topk 1 --jsonl 2>&1%%s", dir);
    assert_int_equal(run(cmd, NULL, out, sizeof out), 0);
    const char *four = strstr(out, "b/digit_4.png\", \"index\": 0, \"top\": [{\"class\": 4,");
    const char *five = strstr(out, "a/digit_5.png\", \"index\": 1, \"top\": [{\"class\": 5,");
    assert_true(four && five && four < five);
    assert_non_null(strstr(out, "skipped 2 files")); /* notes.txt and l.txt */
    snprintf(cmd, sizeof cmd, "%%s run " SAMPLE "@%s/l.txt --topk 1 --jsonl 2>/dev/null%%s", dir);
    assert_int_equal(run(cmd, NULL, out, sizeof out), 0);
    assert_non_null(strstr(out, "digit_6.png\", \"index\": 0, \"top\": [{\"class\": 6,"));
    assert_non_null(strstr(out, "digit_7.png\", \"index\": 1, \"top\": [{\"class\": 7,"));
    snprintf(cmd, sizeof cmd, "cat %s/l.txt | %%s run " SAMPLE "- --topk 1 --jsonl 2>/dev/null%%s",
             dir);
    assert_int_equal(run(cmd, NULL, out, sizeof out), 0);
    assert_non_null(strstr(out, "\"index\": 1, \"top\": [{\"class\": 7,"));
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_exit_codes(void **state)
{
    (void)state;
    char out[4096];
    assert_int_equal(run("%s --help%s", NULL, out, sizeof out), 0);
    assert_non_null(strstr(out, "usage: kinfer COMMAND"));
    assert_int_equal(run("%s --version%s", NULL, out, sizeof out), 0);
    assert_non_null(strstr(out, "kinfer "));
    assert_int_equal(run("%s 2>/dev/null%s", NULL, NULL, 0), 2);
    assert_int_equal(run("%s frobnicate 2>/dev/null%s", NULL, NULL, 0), 2);
    assert_int_equal(run("%s run 2>/dev/null%s", NULL, NULL, 0), 2);
    assert_int_equal(
        run("%s run " SAMPLE "samples/digits --threads zero 2>/dev/null%s", NULL, NULL, 0), 2);
    assert_int_equal(run("%s run " SAMPLE "no-such.png 2>&1%s", NULL, out, sizeof out), 1);
    assert_non_null(strstr(out, "no-such.png"));
    assert_int_equal(run("%s ops%s", NULL, out, sizeof out), 0);
    assert_non_null(strstr(out, "nn.Conv2d\n"));
    assert_non_null(strstr(out, "pnnx.Expression\n"));
}

int main(int argc, char **argv)
{
    (void)argc;
    /* the binary sits one level above this test: BUILD/tests/test_cli -> BUILD/kinfer */
    char self[600];
    snprintf(self, sizeof self, "%s", argv[0]);
    snprintf(kinfer, sizeof kinfer, "%s/../kinfer", dirname(self));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sample_digits),
        cmocka_unit_test(test_save_dir_round_trip),
        cmocka_unit_test(test_exit_codes),
        cmocka_unit_test(test_scores),
        cmocka_unit_test(test_option_messages),
        cmocka_unit_test(test_dump_graph),
        cmocka_unit_test(test_preflight),
        cmocka_unit_test(test_info),
        cmocka_unit_test(test_info_flops),
        cmocka_unit_test(test_streaming),
        cmocka_unit_test(test_inputs),
        cmocka_unit_test(test_preprocess_torchvision),
        cmocka_unit_test(test_csv),
        cmocka_unit_test(test_yolov8_layout),
        cmocka_unit_test(test_segment),
        cmocka_unit_test(test_tokens),
        cmocka_unit_test(test_bench_old_detect),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
