/* cmd_run.c - `kinfer run MODEL.pnnx.param MODEL.pnnx.bin INPUT... [options]`. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "image.h"
#include "npy.h"
#include "run_opts.h"

static void run_usage(FILE *f)
{
    fprintf(
        f,
        "usage: kinfer run MODEL.pnnx.param MODEL.pnnx.bin INPUT... [options]\n"
        "\n"
        "INPUT is a .npy tensor or an image (PNG, JPEG, BMP, GIF, ...), one per model input in\n"
        "file order. A single-input model takes any number of images or directories of images,\n"
        "run in batches of --batch; each batch's results are printed as soon as it is done, and\n"
        "the last line on stderr sums up the run (inputs, seconds, images/s or a .npy batch's\n"
        "items/s, batch latency).\n"
        "Images are converted to the input's channel count, resized (bilinear) to its HxW,\n"
        "scaled to [0,1] and normalised with --mean/--std. With --resize or --crop they are\n"
        "resized as torchvision does a PIL image (antialiased bilinear, bit-exact) and their\n"
        "centre is cropped to the input's HxW instead.\n"
        "\n"
        "options:\n"
        "  --batch N          images per run (default 1)\n"
        "  --tokens IDS       a text model's input as token ids, e.g. 5,17,3: one sequence\n"
        "                     (1, n), instead of INPUT (an int64 .npy works as INPUT too)\n"
        "  --input-shape S    N,C,H,W for a model whose H or W is '?' (default: 640 for a\n"
        "                     detector, else 224)\n"
        "  --save-dir DIR     write each output as DIR/out0.npy, out1.npy, ... (float32), and the\n"
        "                     inputs as the model saw them as DIR/in0.npy, ...; with several\n"
        "                     batches DIR/out0_b0.npy, out0_b1.npy, ... (batch 0, 1, ...)\n"
        "  --threads N        threads to use (default: the CPUs kinfer may use, here %d)\n"
        "  --isa LEVEL        cap the kernels' instruction set: generic, avx2, avx512\n"
        "                     (default: the best this CPU runs, or KINFER_ISA)\n"
        "  --topk K           classes to show for a classifier (default 5)\n"
        "  --labels FILE      class names, one a line\n"
        "  --scores S         classifier scores: softmax of the outputs, or raw values (default:\n"
        "                     softmax, or the outputs as they are when the graph ends in\n"
        "                     softmax; exp of them after log_softmax)\n"
        "  --mean a,b,c       per-channel mean subtracted after scaling (default 0)\n"
        "  --std a,b,c        per-channel divisor (default 1)\n"
        "  --imagenet         --mean 0.485,0.456,0.406 --std 0.229,0.224,0.225\n"
        "  --preprocess torchvision\n"
        "                     torchvision's ImageNet transform: Resize(256), CenterCrop(224),\n"
        "                     ToTensor, Normalize: --resize 256 --crop 224 --imagenet\n"
        "  --resize S|WxH     shorter side to S (aspect kept), or exactly WxH, antialiased as\n"
        "                     Pillow does; then the centre is cropped to the input's size\n"
        "  --crop S|WxH       centre crop (zero-padded when larger), after --resize; it must\n"
        "                     be the input's HxW, and sets a '?' side\n"
        "  --bgr              give the model the channels as B,G,R (OpenCV-trained models)\n"
        "  --letterbox        keep the aspect ratio, pad with 114/255 (on for detectors)\n"
        "  --task T           classify | detect | segment | raw: how to present outputs\n"
        "                     (default: automatic; an output (N, >=100 boxes, 5+classes) is a\n"
        "                     YOLOv5 detector, (N, 4+classes, >=100 boxes) a YOLOv8 one,\n"
        "                     (N, 2..255 classes, H, W) at the input's HxW a segmenter)\n"
        "  --mask OUT.png     segmenter: write the per-pixel class (argmax) as a palette PNG\n"
        "                     at the image's size (several images: OUT_0.png, ...)\n"
        "  --conf C           detector: keep boxes whose objectness x class score (YOLOv8:\n"
        "                     the class score) is >= C (default 0.25)\n"
        "  --iou T            detector: class-aware NMS IoU threshold (default 0.45; 0.7 for\n"
        "                     a YOLOv8-style output, as ultralytics)\n"
        "  --max-det N        detector: at most N boxes per image (default 300); boxes left\n"
        "                     with no area after clipping to the image are dropped; an\n"
        "                     80-class detector without --labels gets the COCO names\n"
        "  --draw OUT.jpg     detector: write the image with boxes, segmenter: with the\n"
        "                     classes' colours over it (.png/.bmp/.tga/JPEG;\n"
        "                     several images give OUT_0.jpg, OUT_1.jpg, ...)\n"
        "  --json             machine-readable results on stdout (one JSON document)\n"
        "  --jsonl            one JSON object per input and line, as each batch finishes\n"
        "  --csv              CSV on stdout, a header then a row per class (rank 1..topk), per\n"
        "                     detection, per segmenter class share, or per output (raw), as\n"
        "                     each batch finishes\n"
        "  --memory-limit MB  fail before planning more tensor memory than this\n"
        "                     (default: the memory the system has available)\n"
        "  --verbose          report weights, planned tensor memory and peak resident memory\n",
        ki_cli_default_threads());
}

static int parse_floats3(const char *s, float *out)
{
    char *end;
    for (int i = 0; i < 3; i++) {
        out[i] = strtof(s, &end);
        if (end == s || (i < 2 && *end != ',') || (i == 2 && *end != '\0')) {
            /* a single value applies to every channel */
            if (i == 0 && *end == '\0' && end != s) {
                out[1] = out[2] = out[0];
                return 1;
            }
            return 0;
        }
        s = end + 1;
    }
    return 1;
}

static int parse_unit(const char *s, float *out)
{
    char *end;
    float v = strtof(s, &end);
    if (end == s || *end != '\0' || !(v >= 0.0f && v <= 1.0f)) {
        return 0;
    }
    *out = v;
    return 1;
}

/* The options of `run`: those that take a value, with what they allow (for the messages), then
 * the flags. */
static const char *const value_opts[][2] = {
    { "--save-dir", "a directory" },
    { "--labels", "a file of class names" },
    { "--draw", "an image file to write" },
    { "--mask", "a .png file to write" },
    { "--tokens", "token ids, comma-separated integers from 0 to 16777216" },
    { "--task", "classify, detect, segment or raw" },
    { "--isa", "generic, avx2 or avx512" },
    { "--scores", "raw or softmax" },
    { "--threads", "an integer from 1 to 1024" },
    { "--memory-limit", "megabytes, an integer from 1 to 1073741824" },
    { "--topk", "an integer from 1 to 1000000" },
    { "--max-det", "an integer from 1 to 30000" },
    { "--batch", "an integer from 1 to 4096" },
    { "--input-shape", "dimensions N,C,H,W such as 1,3,224,224" },
    { "--conf", "a number from 0 to 1" },
    { "--iou", "a number from 0 to 1" },
    { "--mean", "one number or three, comma-separated (a,b,c)" },
    { "--std", "one non-zero number or three, comma-separated (a,b,c)" },
    { "--preprocess", "torchvision" },
    { "--resize", "S or WxH, sides from 1 to 16384" },
    { "--crop", "S or WxH, sides from 1 to 16384" },
};
static const char *const all_opts[] = { "--save-dir", "--labels",   "--draw",    "--mask", "--tokens", "--task",
                                        "--isa",      "--scores",   "--threads", "--memory-limit",
                                        "--topk",     "--max-det",  "--conf",    "--iou",
                                        "--mean",     "--std",      "--json",    "--letterbox",
                                        "--verbose",  "--imagenet", "--help",    "--jsonl",
                                        "--batch",    "--input-shape", "--preprocess", "--resize",
                                        "--crop",     "--bgr",      "--csv",     NULL };

static bool one_of(const char *v, const char *a, const char *b, const char *c)
{
    return strcmp(v, a) == 0 || strcmp(v, b) == 0 || (c && strcmp(v, c) == 0);
}

/* Token ids "5,17,3" into ids (when not NULL): their count, 0 when the list is not valid. Ids are
 * exact in float32 up to 2^24. */
static int64_t parse_tokens(const char *s, float *ids)
{
    int64_t n = 0;
    for (const char *p = s;; p++) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > (1L << 24) || (*end != ',' && *end != '\0') || n >= 1 << 20) {
            return 0;
        }
        if (ids) {
            ids[n] = (float)v;
        }
        n++;
        if (*end == '\0') {
            return n;
        }
        p = end;
    }
}

/* "S" (*w = S, *h = 0) or "WxH", sides from 1 to 16384: 1 when valid. */
static int parse_size(const char *s, int *w, int *h)
{
    char *end;
    long a = strtol(s, &end, 10), b = 0;
    if (end == s || a < 1 || a > 16384) {
        return 0;
    }
    if (*end == 'x' || *end == 'X') {
        const char *t = end + 1;
        b = strtol(t, &end, 10);
        if (end == t || b < 1 || b > 16384) {
            return 0;
        }
    }
    *w = (int)a, *h = (int)b;
    return *end == '\0';
}

/* Option a's value next into o: 1 when valid, 0 when not (the caller names what a allows). */
static int parse_value_opt(const char *a, const char *next, run_opts *o)
{
    long v;
    if (strcmp(a, "--save-dir") == 0) {
        o->save_dir = next;
    } else if (strcmp(a, "--labels") == 0) {
        o->labels_path = next;
    } else if (strcmp(a, "--draw") == 0) {
        o->draw = next;
    } else if (strcmp(a, "--mask") == 0) {
        o->mask = next;
    } else if (strcmp(a, "--tokens") == 0) {
        o->tokens = next;
        return parse_tokens(next, NULL) > 0;
    } else if (strcmp(a, "--task") == 0) {
        o->task = next;
        return one_of(next, "classify", "detect", "raw") || strcmp(next, "segment") == 0;
    } else if (strcmp(a, "--isa") == 0) {
        o->isa = next;
    } else if (strcmp(a, "--scores") == 0) {
        o->scores = next;
        return one_of(next, "raw", "softmax", NULL);
    } else if (strcmp(a, "--threads") == 0) {
        o->threads = ki_cli_parse_int(next, 1, 1024, &v) ? (int)v : 0;
        return o->threads > 0;
    } else if (strcmp(a, "--memory-limit") == 0) {
        o->memory_limit = ki_cli_parse_int(next, 1, 1L << 30, &v) ? (size_t)v << 20 : 0;
        return o->memory_limit > 0;
    } else if (strcmp(a, "--topk") == 0) {
        o->topk = ki_cli_parse_int(next, 1, 1000000, &v) ? (int)v : 0;
        return o->topk > 0;
    } else if (strcmp(a, "--batch") == 0) {
        o->batch = ki_cli_parse_int(next, 1, 4096, &v) ? (int)v : 0;
        return o->batch > 0;
    } else if (strcmp(a, "--input-shape") == 0) {
        return ki_cli_parse_shape(next, &o->input_shape) && o->input_shape.ndim == 4;
    } else if (strcmp(a, "--max-det") == 0) {
        o->max_det = ki_cli_parse_int(next, 1, KI_DETECT_MAX_NMS, &v) ? (int)v : 0;
        return o->max_det > 0;
    } else if (strcmp(a, "--conf") == 0) {
        return parse_unit(next, &o->conf);
    } else if (strcmp(a, "--iou") == 0) {
        o->have_iou = true;
        return parse_unit(next, &o->iou);
    } else if (strcmp(a, "--preprocess") == 0) {
        o->preprocess = next;
        return strcmp(next, "torchvision") == 0;
    } else if (strcmp(a, "--resize") == 0) {
        int w, h;
        if (!parse_size(next, &w, &h)) {
            return 0;
        }
        o->resize_short = h ? 0 : w;
        o->resize_w = h ? w : 0;
        o->resize_h = h;
    } else if (strcmp(a, "--crop") == 0) {
        int w, h;
        if (!parse_size(next, &w, &h)) {
            return 0;
        }
        o->crop_w = w;
        o->crop_h = h ? h : w;
    } else if (strcmp(a, "--mean") == 0) {
        o->have_mean = true;
        return parse_floats3(next, o->mean);
    } else {
        o->have_std = true;
        return parse_floats3(next, o->std) && o->std[0] != 0 && o->std[1] != 0 && o->std[2] != 0;
    }
    return 1;
}

/* What value option a allows, or NULL when a is not one. */
static const char *value_opt(const char *a)
{
    for (size_t i = 0; i < sizeof value_opts / sizeof value_opts[0]; i++) {
        if (strcmp(a, value_opts[i][0]) == 0) {
            return value_opts[i][1];
        }
    }
    return NULL;
}

/* One flag; false when a is not one. */
static bool parse_flag(const char *a, run_opts *o)
{
    static const float imean[3] = { 0.485f, 0.456f, 0.406f }, istd[3] = { 0.229f, 0.224f, 0.225f };
    if (strcmp(a, "--json") == 0) {
        o->json = true;
    } else if (strcmp(a, "--jsonl") == 0) {
        o->jsonl = true;
    } else if (strcmp(a, "--csv") == 0) {
        o->csv = true;
    } else if (strcmp(a, "--letterbox") == 0) {
        o->letterbox = true;
    } else if (strcmp(a, "--verbose") == 0) {
        o->verbose = true;
    } else if (strcmp(a, "--bgr") == 0) {
        o->bgr = true;
    } else if (strcmp(a, "--imagenet") == 0) {
        o->imagenet = true;
        memcpy(o->mean, imean, sizeof imean);
        memcpy(o->std, istd, sizeof istd);
    } else {
        return false;
    }
    return true;
}

/* Option argv[*i] (and its value, --opt value or --opt=value): KI_EXIT_OK, or a usage error
 * after a message naming the option, the value and what it allows. */
static int parse_option(int argc, char **argv, int *i, run_opts *o)
{
    char name[64];
    const char *a = argv[*i], *eq = ki_cli_split_eq(a, name, sizeof name);
    const char *opt = eq ? name : a, *allowed = value_opt(opt);
    if (!allowed) {
        if (!eq && parse_flag(opt, o)) {
            return KI_EXIT_OK;
        }
        if (eq && parse_flag(opt, o)) {
            ki_cli_error("run: %s takes no value", opt);
        } else {
            ki_cli_unknown_option("run", opt, all_opts);
        }
        return KI_EXIT_USAGE;
    }
    const char *val = eq ? eq : *i + 1 < argc ? argv[++*i] : NULL;
    if (!val) {
        ki_cli_error("run: %s needs a value: %s", opt, allowed);
        return KI_EXIT_USAGE;
    }
    if (!parse_value_opt(opt, val, o)) {
        ki_cli_error("run: %s '%s': expected %s", opt, val, allowed);
        return KI_EXIT_USAGE;
    }
    return KI_EXIT_OK;
}

static int parse_args(int argc, char **argv, run_opts *o)
{
    int npos = 0;
    o->threads = ki_cli_default_threads();
    o->topk = 5;
    o->max_det = KI_DETECT_MAX_DET;
    o->batch = 1;
    o->conf = 0.25f;
    o->iou = 0.45f;
    for (int i = 0; i < 3; i++) {
        o->mean[i] = 0.0f;
        o->std[i] = 1.0f;
    }
    o->inputs = calloc((size_t)argc, sizeof *o->inputs);
    if (!o->inputs) {
        return KI_EXIT_FAIL;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            run_usage(stdout);
            return -1;
        } else if (a[0] == '-' && a[1] != '\0') {
            int rc = parse_option(argc, argv, &i, o);
            if (rc != KI_EXIT_OK) {
                return rc;
            }
        } else if (npos == 0) {
            o->param = a, npos++;
        } else if (npos == 1) {
            o->bin = a, npos++;
        } else {
            o->inputs[o->n_inputs++] = a;
        }
    }
    if (!o->param || !o->bin || (o->n_inputs == 0) == !o->tokens) {
        if (o->tokens && o->n_inputs > 0) {
            ki_cli_error("run: --tokens is the model's input: give no INPUT files with it");
            return KI_EXIT_USAGE;
        }
        run_usage(stderr);
        return KI_EXIT_USAGE;
    }
    if (o->csv + o->json + o->jsonl > 1) {
        ki_cli_error("run: --csv, --json and --jsonl are different formats: give one");
        return KI_EXIT_USAGE;
    }
    if (o->preprocess) { /* torchvision's transform, where no option said otherwise */
        if (!o->resize_short && !o->resize_w) {
            o->resize_short = 256;
        }
        if (!o->crop_w) {
            o->crop_w = o->crop_h = 224;
        }
        if (!o->have_mean && !o->have_std && !o->imagenet) {
            parse_flag("--imagenet", o);
        }
    }
    return KI_EXIT_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The growing list of input paths; owned[] are the ones allocated here. */
typedef struct path_list {
    const char **p;
    int n, cap;
    char **owned;
    int n_owned, cap_owned;
    int skipped; /* files in directories that are not images */
} path_list;

static bool list_add(path_list *l, const char *path, bool copy)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        const char **t = realloc(l->p, (size_t)cap * sizeof *t);
        if (!t) {
            return false;
        }
        l->p = t, l->cap = cap;
    }
    if (!copy) {
        l->p[l->n++] = path;
        return true;
    }
    if (l->n_owned == l->cap_owned) {
        int cap = l->cap_owned ? 2 * l->cap_owned : 64;
        char **t = realloc(l->owned, (size_t)cap * sizeof *t);
        if (!t) {
            return false;
        }
        l->owned = t, l->cap_owned = cap;
    }
    char *c = strdup(path);
    if (!c) {
        return false;
    }
    l->owned[l->n_owned++] = c;
    l->p[l->n++] = c;
    return true;
}

/* A directory's images, its subdirectories' too, in sorted order at every level. */
static int add_dir(path_list *l, const char *dir, int depth)
{
    DIR *d = opendir(dir);
    if (!d) {
        ki_cli_error("%s: cannot open directory: %s", dir, strerror(errno));
        return KI_EXIT_FAIL;
    }
    path_list names = { 0 };
    struct dirent *e;
    int rc = KI_EXIT_OK;
    while (rc == KI_EXIT_OK && (e = readdir(d)) != NULL) {
        if (e->d_name[0] != '.') {
            char full[4096];
            snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
            rc = list_add(&names, full, true) ? KI_EXIT_OK : KI_EXIT_FAIL;
        }
    }
    closedir(d);
    qsort(names.p, (size_t)names.n, sizeof *names.p, cmp_str);
    for (int i = 0; rc == KI_EXIT_OK && i < names.n; i++) {
        struct stat sb;
        if (stat(names.p[i], &sb) == 0 && S_ISDIR(sb.st_mode)) {
            rc = depth < 32 ? add_dir(l, names.p[i], depth + 1) : KI_EXIT_OK;
        } else if (ki_image_is_image_path(names.p[i])) {
            rc = list_add(l, names.p[i], true) ? KI_EXIT_OK : KI_EXIT_FAIL;
        } else {
            l->skipped++;
        }
    }
    for (int i = 0; i < names.n_owned; i++) {
        free(names.owned[i]);
    }
    free(names.owned);
    free(names.p);
    return rc;
}

/* One path a line from f (a list file or stdin); blank lines are skipped. */
static int add_lines(path_list *l, FILE *f)
{
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] && !list_add(l, line, true)) {
            return KI_EXIT_FAIL;
        }
    }
    return KI_EXIT_OK;
}

/* Expands the input arguments: a directory into its images (recursively, sorted), @FILE into the
 * paths it lists one a line, - into the paths read from standard input. */
static int expand_dirs(run_opts *o, char ***owned, int *n_owned)
{
    path_list l = { 0 };
    int rc = KI_EXIT_OK;
    for (int i = 0; rc == KI_EXIT_OK && i < o->n_inputs; i++) {
        const char *a = o->inputs[i];
        struct stat sb;
        int before = l.n;
        if (strcmp(a, "-") == 0) {
            rc = add_lines(&l, stdin);
        } else if (a[0] == '@') {
            FILE *f = fopen(a + 1, "r");
            if (!f) {
                ki_cli_error("%s: cannot open the list: %s", a + 1, strerror(errno));
                rc = KI_EXIT_FAIL;
                break;
            }
            rc = add_lines(&l, f);
            fclose(f);
        } else if (stat(a, &sb) == 0 && S_ISDIR(sb.st_mode)) {
            rc = add_dir(&l, a, 0);
            if (rc == KI_EXIT_OK && l.n == before) {
                ki_cli_error("%s: no images in this directory", a);
                rc = KI_EXIT_FAIL;
            }
        } else {
            rc = list_add(&l, a, false) ? KI_EXIT_OK : KI_EXIT_FAIL;
        }
    }
    if (rc == KI_EXIT_OK && l.n == 0 && !o->tokens) {
        ki_cli_error("run: no inputs");
        rc = KI_EXIT_USAGE;
    }
    if (rc == KI_EXIT_OK && l.skipped) {
        fprintf(stderr,
                "kinfer: skipped %d file%s in the directories that %s not images kinfer "
                "reads (.png .jpg .jpeg .bmp .gif .tga .pgm .ppm .pnm .psd .hdr .pic)\n",
                l.skipped, l.skipped == 1 ? "" : "s", l.skipped == 1 ? "is" : "are");
    }
    *owned = l.owned, *n_owned = l.n_owned;
    if (rc != KI_EXIT_OK) {
        free(l.p);
        return rc;
    }
    free(o->inputs);
    o->inputs = l.p;
    o->n_inputs = l.n;
    return KI_EXIT_OK;
}

typedef struct input_buf {
    ki_shape shape;
    float *data;
} input_buf;

/* Whether images are going to a detector: then they are letterboxed, as YOLOv5 does. */
static bool wants_detect(const run_opts *o, const ki_model *m)
{
    if (o->task) {
        return strcmp(o->task, "detect") == 0;
    }
    if (ki_model_n_outputs(m) < 1) {
        return false;
    }
    ki_shape d = ki_model_output_decl(m, 0);
    return ki_run_detector_layout(&d, true) != 0;
}

/* How images become the model's input: the declared C, H and W; a '?' side from --input-shape,
 * else a detector's KI_RUN_DETECT_SIZE or 224 (the same for every image of the run). */
static ki_status image_prep(const run_opts *o, const ki_model *m, ki_image_prep *p, ki_error *err)
{
    ki_shape decl = ki_model_input_decl(m, 0);
    char buf[128];
    if (o->input_shape.ndim > 0) {
        if (o->input_shape.ndim != 4 ||
            (decl.ndim == 4 && decl.d[1] >= 0 && o->input_shape.d[1] != decl.d[1])) {
            return KI_FAIL(err, KI_ERR_SHAPE, "--input-shape %s does not fit input 0 %s",
                           ki_shape_str(&o->input_shape, buf, sizeof buf),
                           ki_shape_str(&decl, buf + 64, 64));
        }
        decl = o->input_shape;
    }
    if (decl.ndim != 4 || decl.d[1] < 0) {
        return KI_FAIL(err, KI_ERR_SHAPE,
                       "input 0 has shape %s: images need an (N,C,H,W) input with a known C; give "
                       "a .npy instead",
                       decl.ndim < 0 ? "(unannotated)" : ki_shape_str(&decl, buf, sizeof buf));
    }
    bool detect = wants_detect(o, m);
    bool crop = o->resize_short || o->resize_w || o->crop_w;
    const char *which = o->preprocess ? "--preprocess" : o->crop_w ? "--crop" : "--resize";
    if (crop && (detect || o->letterbox)) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED,
                       "%s: images for a detector are letterboxed; leave out %s", which, which);
    }
    int side = detect ? KI_RUN_DETECT_SIZE : 224;
    int side_w = o->crop_w ? o->crop_w : o->resize_w ? o->resize_w : side;
    int side_h = o->crop_w ? o->crop_h : o->resize_w ? o->resize_h : side;
    *p = (ki_image_prep){ .channels = (int)decl.d[1],
                          .height = decl.d[2] >= 0 ? (int)decl.d[2] : side_h,
                          .width = decl.d[3] >= 0 ? (int)decl.d[3] : side_w,
                          .letterbox = o->letterbox || detect,
                          .center_crop = crop,
                          .resize_w = o->resize_w,
                          .resize_h = o->resize_h,
                          .resize_short = o->resize_short,
                          .bgr = o->bgr };
    if (o->crop_w && (o->crop_w != p->width || o->crop_h != p->height)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "%s: crops %dx%d but input 0 %s takes %dx%d (WxH)",
                       which, o->crop_w, o->crop_h, ki_shape_str(&decl, buf, sizeof buf),
                       p->width, p->height);
    }
    memcpy(p->mean, o->mean, sizeof p->mean);
    memcpy(p->std, o->std, sizeof p->std);
    int64_t d[4] = { o->batch, p->channels, p->height, p->width };
    ki_shape one = ki_shape_make(4, d);
    return ki_shape_check(&one, err);
}

static bool all_images(const run_opts *o, const ki_model *m)
{
    bool all = !o->tokens && ki_model_n_inputs(m) == 1;
    for (int i = 0; all && i < o->n_inputs; i++) {
        all = !strstr(o->inputs[i], ".npy");
    }
    return all;
}

/* One .npy per model input, or the --tokens sequence as the only one. */
static ki_status load_npys(const run_opts *o, const ki_model *m, input_buf *ib, ki_error *err)
{
    int need = ki_model_n_inputs(m);
    if (o->tokens) {
        if (need != 1) {
            return KI_FAIL(err, KI_ERR_SHAPE, "--tokens: the model has %d inputs, not one", need);
        }
        int64_t n = parse_tokens(o->tokens, NULL), d[2] = { 1, n };
        ib[0].shape = ki_shape_make(2, d);
        ib[0].data = malloc((size_t)n * sizeof *ib[0].data);
        if (!ib[0].data) {
            return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
        }
        parse_tokens(o->tokens, ib[0].data);
        return KI_OK;
    }
    if (o->n_inputs != need) {
        return KI_FAIL(err, KI_ERR_SHAPE, "the model has %d input%s, %d given", need,
                       need == 1 ? "" : "s", o->n_inputs);
    }
    for (int i = 0; i < need; i++) {
        if (ki_image_is_image_path(o->inputs[i])) {
            return KI_FAIL(err, KI_ERR_UNSUPPORTED,
                           "%s: images are only accepted for single-input models; give a .npy",
                           o->inputs[i]);
        }
        ki_status st = ki_npy_read(o->inputs[i], &ib[i].shape, &ib[i].data, err);
        if (st != KI_OK) {
            return st;
        }
    }
    return KI_OK;
}

/* DIR/outI.npy and DIR/inI.npy, or with several batches DIR/outI_bB.npy (batch B). */
static void save_path(const run_opts *o, bool is_out, int i, int b, char *path, size_t len)
{
    if (b < 0) {
        snprintf(path, len, "%s/%s%d.npy", o->save_dir, is_out ? "out" : "in", i);
    } else {
        snprintf(path, len, "%s/%s%d_b%d.npy", o->save_dir, is_out ? "out" : "in", i, b);
    }
}

static ki_status save_outputs(const run_opts *o, const ki_model *m, const ki_session *s, int b,
                              ki_error *err)
{
    if (mkdir(o->save_dir, 0777) != 0 && errno != EEXIST) {
        return KI_FAIL(err, KI_ERR_IO, "%s: cannot create directory: %s", o->save_dir,
                       strerror(errno));
    }
    size_t len = strlen(o->save_dir) + 48;
    char *path = malloc(len);
    if (!path) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    ki_status st = KI_OK;
    for (int i = 0; i < ki_model_n_outputs(m) && st == KI_OK; i++) {
        ki_tensor t = ki_session_output(s, i);
        save_path(o, true, i, b, path, len);
        st = ki_npy_write(path, &t.shape, t.data, err);
    }
    /* the inputs as the model saw them (after image preprocessing), to re-run or compare */
    for (int i = 0; i < ki_model_n_inputs(m) && st == KI_OK; i++) {
        ki_tensor t = ki_session_input(s, i);
        save_path(o, false, i, b, path, len);
        st = ki_npy_write(path, &t.shape, t.data, err);
    }
    /* all or nothing: a failed write removes what this run already wrote */
    for (int i = 0; st != KI_OK && i < ki_model_n_outputs(m) + ki_model_n_inputs(m); i++) {
        bool is_out = i < ki_model_n_outputs(m);
        save_path(o, is_out, is_out ? i : i - ki_model_n_outputs(m), b, path, len);
        remove(path);
    }
    free(path);
    return st;
}

/* A session for these input shapes: *s itself when it was planned for them, else a new one. */
static ki_status session_for(const run_opts *o, const ki_model *m, const ki_shape *shapes,
                             ki_session **s, ki_error *err)
{
    int n_in = ki_model_n_inputs(m);
    bool same = *s != NULL;
    for (int i = 0; same && i < n_in; i++) {
        ki_tensor t = ki_session_input(*s, i);
        same = ki_shape_equal(&t.shape, &shapes[i]);
    }
    if (same) {
        return KI_OK;
    }
    ki_session_destroy(*s);
    *s = NULL;
    ki_session_options so = { o->threads,
                              o->memory_limit ? o->memory_limit : ki_cli_memory_available() };
    ki_status st = ki_session_create(m, shapes, n_in, &so, s, err);
    if (st == KI_OK && o->verbose) {
        fprintf(stderr, "kinfer: %.1f MiB of weights, %.1f MiB of planned tensor memory\n",
                (double)ki_model_weight_bytes(m) / (1 << 20),
                (double)ki_session_planned_bytes(*s) / (1 << 20));
    }
    return st;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The closing stderr line of every successful run: inputs, seconds, the rate, mean and p95
 * latency of a batch (lat[0..n), sorted here). Image runs count images; a .npy run counts the
 * items of its batch (the rows of output 0, as printed), "(N items)" when that is not the inputs'
 * count: a 1,000-image .npy batch runs at thousands of items/s, not at one input a run. */
static void print_summary(int inputs, int items, const char *unit, double secs, double *lat, int n)
{
    double sum = 0;
    for (int i = 0; i < n; i++) {
        sum += lat[i];
    }
    qsort(lat, (size_t)n, sizeof *lat, cmp_dbl);
    double p95 = n ? lat[(n * 95 + 99) / 100 - 1] : 0;
    char what[48] = "";
    if (items != inputs) {
        snprintf(what, sizeof what, " (%d %s)", items, unit);
    }
    fprintf(stderr,
            "kinfer: %d input%s%s in %.2f s, %.1f %s/s, per batch mean %.1f ms, p95 %.1f ms\n",
            inputs, inputs == 1 ? "" : "s", what, secs, secs > 0 ? items / secs : 0.0, unit,
            n ? sum / n * 1e3 : 0.0, p95 * 1e3);
}

/* .npy inputs, one per model input: one run. */
static ki_status run_npys(const run_opts *o, const ki_model *m, const labels *lb, ki_error *err)
{
    int n_in = ki_model_n_inputs(m);
    input_buf *ib = calloc((size_t)n_in + 1, sizeof *ib);
    ki_shape *shapes = calloc((size_t)n_in + 1, sizeof *shapes);
    ki_session *s = NULL;
    double t0 = now_s();
    ki_status st =
        ib && shapes ? load_npys(o, m, ib, err) : KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    if (st == KI_OK && o->draw) {
        st = KI_FAIL(err, KI_ERR_UNSUPPORTED, "--draw needs image inputs");
    }
    for (int i = 0; st == KI_OK && i < n_in; i++) {
        shapes[i] = ib[i].shape;
    }
    if (st == KI_OK) {
        st = session_for(o, m, shapes, &s, err);
    }
    for (int i = 0; st == KI_OK && i < n_in; i++) {
        ki_tensor t = ki_session_input(s, i);
        memcpy(t.data, ib[i].data, (size_t)ki_shape_count(&t.shape) * sizeof(float));
    }
    st = st == KI_OK ? ki_session_run(s, err) : st;
    if (st == KI_OK && o->save_dir) {
        st = save_outputs(o, m, s, -1, err);
    }
    int rows = 1;
    if (st == KI_OK) {
        ki_tensor y = ki_session_output(s, 0);
        rows = y.shape.ndim >= 1 && y.shape.d[0] < INT32_MAX ? (int)y.shape.d[0] : 1;
        static const char *const tokens[] = { "tokens" };
        run_sources src = { o->tokens ? tokens : o->inputs, o->tokens ? 1 : o->n_inputs, NULL, 0,
                            rows, true };
        ki_run_print_begin(o, m, s);
        st = ki_run_print(o, m, s, lb, &src, err);
        ki_run_print_end(o);
    }
    if (st == KI_OK) {
        double dt = now_s() - t0;
        print_summary(o->tokens ? 1 : o->n_inputs, rows, "items", dt, &dt, 1);
    }
    for (int i = 0; ib && i < n_in; i++) {
        free(ib[i].data);
    }
    free(ib);
    free(shapes);
    ki_session_destroy(s);
    return st;
}

/* Progress on a terminal: done/total, images/s, time left. */
static void print_progress(int done, int total, double secs)
{
    double rate = secs > 0 ? done / secs : 0;
    fprintf(stderr, "\rkinfer: %d/%d images, %.1f images/s, %.0f s left   ", done, total, rate,
            rate > 0 ? (total - done) / rate : 0.0);
}

/* One batch's images decoded and resized into buf, on the loader thread while the batch before
 * it runs. */
typedef struct batch_load {
    const run_opts *o;
    const ki_image_prep *p;
    int first, n;
    float *buf;
    ki_detect_map *maps;
    ki_status st;
    ki_error err;
} batch_load;

static void *load_batch(void *arg)
{
    batch_load *l = arg;
    const size_t per = (size_t)l->p->channels * (size_t)l->p->height * (size_t)l->p->width;
    l->st = KI_OK;
    for (int i = 0; l->st == KI_OK && i < l->n; i++) {
        ki_image_info info = { 0 };
        l->st = ki_image_load(l->o->inputs[l->first + i], l->p, l->buf + per * (size_t)i, &info,
                              &l->err);
        if (l->st == KI_OK) {
            l->maps[i] = ki_detect_map_image(l->p, &info);
        }
    }
    return NULL;
}

/* Images in batches of o->batch: each batch is run, printed (and saved) while the next one is
 * decoded on a second thread, so memory is bounded by two batches' inputs and one session, and
 * results appear as they are ready. */
static ki_status run_images(const run_opts *o, const ki_model *m, const labels *lb, ki_error *err)
{
    ki_image_prep p;
    ki_status st = image_prep(o, m, &p, err);
    if (st != KI_OK) {
        return st;
    }
    const int bs = o->batch, nb = (o->n_inputs + bs - 1) / bs;
    const size_t per = (size_t)p.channels * (size_t)p.height * (size_t)p.width;
    batch_load ld[2] = { { .o = o, .p = &p }, { .o = o, .p = &p } };
    for (int k = 0; k < 2; k++) {
        ld[k].buf = malloc(per * (size_t)bs * sizeof *ld[k].buf);
        ld[k].maps = calloc((size_t)bs, sizeof *ld[k].maps);
    }
    double *lat = calloc((size_t)nb, sizeof *lat), t_start = now_s();
    ki_session *s = NULL;
    pthread_t loader;
    bool loading = false;
    const bool progress = isatty(2) && nb > 1;
    st = ld[0].buf && ld[1].buf && ld[0].maps && ld[1].maps && lat
             ? KI_OK
             : KI_FAIL(err, KI_ERR_NOMEM, "out of memory for a batch");
    for (int b = 0; st == KI_OK && b < nb; b++) {
        const int first = b * bs, n = o->n_inputs - first < bs ? o->n_inputs - first : bs;
        batch_load *cur = &ld[b & 1], *next = &ld[(b + 1) & 1];
        double t0 = now_s();
        if (b == 0) {
            cur->first = first, cur->n = n;
            load_batch(cur);
        } else if (loading) {
            pthread_join(loader, NULL);
            loading = false;
        }
        if (cur->st != KI_OK) {
            *err = cur->err;
            st = cur->st;
            break;
        }
        if (b + 1 < nb) { /* the next batch decodes while this one runs */
            next->first = first + bs;
            next->n = o->n_inputs - next->first < bs ? o->n_inputs - next->first : bs;
            loading = pthread_create(&loader, NULL, load_batch, next) == 0;
            if (!loading) {
                load_batch(next);
            }
        }
        int64_t d[4] = { n, p.channels, p.height, p.width };
        ki_shape shape = ki_shape_make(4, d);
        st = session_for(o, m, &shape, &s, err);
        if (st == KI_OK) {
            memcpy(ki_session_input(s, 0).data, cur->buf, per * (size_t)n * sizeof *cur->buf);
            st = ki_session_run(s, err);
        }
        if (st == KI_OK && b == 0) {
            ki_run_print_begin(o, m, s);
        }
        run_sources src = { o->inputs + first, n, cur->maps, first, o->n_inputs, b + 1 == nb };
        st = st == KI_OK ? ki_run_print(o, m, s, lb, &src, err) : st;
        if (st == KI_OK && o->save_dir) {
            st = save_outputs(o, m, s, nb > 1 ? b : -1, err);
        }
        fflush(stdout);
        lat[b] = now_s() - t0;
        if (progress) {
            print_progress(first + n, o->n_inputs, now_s() - t_start);
        }
    }
    if (loading) {
        pthread_join(loader, NULL);
    }
    if (progress) {
        fputc('\n', stderr);
    }
    if (st == KI_OK) {
        ki_run_print_end(o);
        if (o->verbose) {
            fprintf(stderr, "kinfer: peak resident memory %.1f MiB\n",
                    (double)ki_cli_peak_rss() / (1 << 20));
        }
        print_summary(o->n_inputs, o->n_inputs, "images", now_s() - t_start, lat, nb);
    }
    for (int k = 0; k < 2; k++) {
        free(ld[k].buf);
        free(ld[k].maps);
    }
    free(lat);
    ki_session_destroy(s);
    return st;
}

/* mkdir -p of path (all its missing parents too). */
static int make_dirs(const char *path)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
                return -1;
            }
            *p = '/';
        }
    }
    return mkdir(buf, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

/* Whether a file can be created in directory dir (a probe file, removed again). */
static bool dir_writable(const char *dir, char *why, size_t n)
{
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/.kinfer-probe-XXXXXX", dir);
    int fd = mkstemp(probe);
    if (fd < 0) {
        snprintf(why, n, "%s", strerror(errno));
        return false;
    }
    close(fd);
    unlink(probe);
    return true;
}

/* Checks the output options before any work, so a bad one loses nothing: --save-dir is created
 * (with its parents) and must be writable; --draw's directory must exist and be writable and its
 * extension be one kinfer writes. A usage error (exit 2) names the option. */
/* An output picture's option (--draw, --mask): a file name with one of exts (n of them) whose
 * directory exists and is writable. */
static int check_out_picture(const char *opt, const char *path, const char *const *exts, int n,
                             const char *allowed)
{
    char why[256];
    const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
    bool known = false;
    for (int i = 0; dot && (!slash || dot > slash) && i < n; i++) {
        known = known || strcasecmp(dot, exts[i]) == 0;
    }
    if (!known) {
        ki_cli_error("run: %s %s: the file name must end in %s", opt, path, allowed);
        return KI_EXIT_USAGE;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + (slash == path) : 1,
             slash ? path : ".");
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        ki_cli_error("run: %s %s: directory %s does not exist", opt, path, dir);
        return KI_EXIT_USAGE;
    }
    if (!dir_writable(dir, why, sizeof why)) {
        ki_cli_error("run: %s %s: cannot write in %s: %s", opt, path, dir, why);
        return KI_EXIT_USAGE;
    }
    return KI_EXIT_OK;
}

static int preflight(const run_opts *o)
{
    char why[256];
    if (o->save_dir && make_dirs(o->save_dir) != 0) {
        ki_cli_error("run: --save-dir %s: cannot create it: %s", o->save_dir, strerror(errno));
        return KI_EXIT_USAGE;
    }
    if (o->save_dir && !dir_writable(o->save_dir, why, sizeof why)) {
        ki_cli_error("run: --save-dir %s: cannot write there: %s", o->save_dir, why);
        return KI_EXIT_USAGE;
    }
    static const char *const exts[] = { ".jpg", ".jpeg", ".png", ".bmp", ".tga" };
    int rc = KI_EXIT_OK;
    if (o->draw) {
        rc = check_out_picture("--draw", o->draw, exts, 5, ".jpg, .jpeg, .png, .bmp or .tga");
    }
    if (rc == KI_EXIT_OK && o->mask) {
        rc = check_out_picture("--mask", o->mask, exts + 2, 1, ".png");
    }
    return rc;
}

/* Checks the options against the model once it is loaded: --imagenet needs a 3-channel input;
 * a labels file whose count differs from the classes, or --draw on a model that is not a
 * detector, gets a warning. */
static int check_against_model(const run_opts *o, const ki_model *m, const labels *lb)
{
    ki_shape in = ki_model_input_decl(m, 0), out = ki_model_output_decl(m, 0);
    if (o->imagenet && in.ndim == 4 && in.d[1] >= 0 && in.d[1] != 3) {
        ki_cli_error("run: --imagenet: the model's input has %lld channel%s; ImageNet "
                     "normalisation is for RGB (3 channels)",
                     (long long)in.d[1], in.d[1] == 1 ? "" : "s");
        return KI_EXIT_USAGE;
    }
    bool sized = in.ndim == 4 && in.d[2] >= 0 && in.d[3] >= 0;
    if (o->crop_w && sized && (o->crop_w != in.d[3] || o->crop_h != in.d[2])) {
        ki_cli_error("run: %s: crops %dx%d, but the model's input is %lldx%lld (WxH)",
                     o->preprocess ? "--preprocess torchvision" : "--crop", o->crop_w, o->crop_h,
                     (long long)in.d[3], (long long)in.d[2]);
        return KI_EXIT_USAGE;
    }
    if (lb->names && out.ndim == 2 && out.d[1] > 0 && out.d[1] != lb->n) {
        fprintf(stderr,
                "kinfer: warning: --labels %s has %d names but the model has %lld classes\n",
                o->labels_path, lb->n, (long long)out.d[1]);
    }
    bool segmenter = (o->task && strcmp(o->task, "segment") == 0) ||
                     (!o->task && out.ndim == 4 && out.d[1] >= 2);
    if (o->mask && !segmenter) {
        fprintf(stderr, "kinfer: warning: --mask: %s is not a segmenter; nothing will be written\n",
                o->param);
    }
    if (o->draw && !ki_run_detector_layout(&out, true) && !segmenter &&
        (!o->task || strcmp(o->task, "detect") != 0)) {
        fprintf(stderr, "kinfer: warning: --draw: %s is not a detector; nothing will be drawn\n",
                o->param);
    }
    return KI_EXIT_OK;
}

static int run_model(const run_opts *o)
{
    ki_error err;
    ki_model *m = NULL;
    labels lb = { NULL, 0 };
    ki_status st = ki_model_load(o->param, o->bin, NULL, &m, &err);
    if (st == KI_OK && o->labels_path) {
        st = ki_labels_load(o->labels_path, &lb, &err);
    }
    int usage = st == KI_OK ? check_against_model(o, m, &lb) : KI_EXIT_OK;
    if (st == KI_OK && usage == KI_EXIT_OK) {
        st = all_images(o, m) ? run_images(o, m, &lb, &err) : run_npys(o, m, &lb, &err);
    }
    if (st != KI_OK) {
        ki_cli_error("%s", err.msg);
    }
    ki_labels_free(&lb);
    ki_model_destroy(m);
    return usage != KI_EXIT_OK ? usage : st == KI_OK ? KI_EXIT_OK : KI_EXIT_FAIL;
}

int ki_cli_run(int argc, char **argv)
{
    run_opts o;
    memset(&o, 0, sizeof o);
    int rc = parse_args(argc, argv, &o);
    char **owned = NULL;
    int n_owned = 0;
    if (rc == KI_EXIT_OK && o.isa && !ki_cli_set_isa(o.isa, "run: --isa")) {
        rc = KI_EXIT_USAGE;
    }
    if (rc == KI_EXIT_OK) {
        rc = preflight(&o);
    }
    if (rc == KI_EXIT_OK) {
        rc = expand_dirs(&o, &owned, &n_owned);
    }
    if (rc == KI_EXIT_OK) {
        ki_cli_set_threads(o.threads);
        rc = run_model(&o);
    }
    for (int i = 0; i < n_owned; i++) {
        free(owned[i]);
    }
    free(owned);
    free(o.inputs);
    return rc < 0 ? KI_EXIT_OK : rc;
}
