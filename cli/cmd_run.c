/* cmd_run.c - `kinfer run MODEL.pnnx.param MODEL.pnnx.bin INPUT... [options]`. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
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
        "file order. For a single-input model, several images or a directory of images form one\n"
        "batch. Images are converted to the input's channel count, resized (bilinear) to its HxW,\n"
        "scaled to [0,1] and normalised with --mean/--std.\n"
        "\n"
        "options:\n"
        "  --save-dir DIR     write each output as DIR/out0.npy, out1.npy, ... (float32), and the\n"
        "                     inputs as the model saw them as DIR/in0.npy, ...\n"
        "  --threads N        threads to use (default: all cores, here %d)\n"
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
        "  --letterbox        keep the aspect ratio, pad with 114/255 (on for detectors)\n"
        "  --task T           classify | detect | raw: how to present outputs (default:\n"
        "                     automatic; an output (N, >=100 boxes, 5+classes) is a detector)\n"
        "  --conf C           detector: keep boxes with objectness x class score >= C (0.25)\n"
        "  --iou T            detector: class-aware NMS IoU threshold (default 0.45)\n"
        "  --max-det N        detector: at most N boxes per image (default 300); boxes left\n"
        "                     with no area after clipping to the image are dropped; an\n"
        "                     80-class detector without --labels gets the COCO names\n"
        "  --draw OUT.jpg     detector: write the image with boxes (.png/.bmp/.tga/JPEG;\n"
        "                     several images give OUT_0.jpg, OUT_1.jpg, ...)\n"
        "  --json             machine-readable results on stdout\n"
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
    { "--task", "classify, detect or raw" },
    { "--isa", "generic, avx2 or avx512" },
    { "--scores", "raw or softmax" },
    { "--threads", "an integer from 1 to 1024" },
    { "--memory-limit", "megabytes, an integer from 1 to 1073741824" },
    { "--topk", "an integer from 1 to 1000000" },
    { "--max-det", "an integer from 1 to 30000" },
    { "--conf", "a number from 0 to 1" },
    { "--iou", "a number from 0 to 1" },
    { "--mean", "one number or three, comma-separated (a,b,c)" },
    { "--std", "one non-zero number or three, comma-separated (a,b,c)" },
};
static const char *const all_opts[] = { "--save-dir", "--labels",   "--draw",    "--task",
                                        "--isa",      "--scores",   "--threads", "--memory-limit",
                                        "--topk",     "--max-det",  "--conf",    "--iou",
                                        "--mean",     "--std",      "--json",    "--letterbox",
                                        "--verbose",  "--imagenet", "--help",    NULL };

static bool one_of(const char *v, const char *a, const char *b, const char *c)
{
    return strcmp(v, a) == 0 || strcmp(v, b) == 0 || (c && strcmp(v, c) == 0);
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
    } else if (strcmp(a, "--task") == 0) {
        o->task = next;
        return one_of(next, "classify", "detect", "raw");
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
    } else if (strcmp(a, "--max-det") == 0) {
        o->max_det = ki_cli_parse_int(next, 1, KI_DETECT_MAX_NMS, &v) ? (int)v : 0;
        return o->max_det > 0;
    } else if (strcmp(a, "--conf") == 0) {
        return parse_unit(next, &o->conf);
    } else if (strcmp(a, "--iou") == 0) {
        return parse_unit(next, &o->iou);
    } else if (strcmp(a, "--mean") == 0) {
        return parse_floats3(next, o->mean);
    } else {
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
    } else if (strcmp(a, "--letterbox") == 0) {
        o->letterbox = true;
    } else if (strcmp(a, "--verbose") == 0) {
        o->verbose = true;
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
    if (!o->param || !o->bin || o->n_inputs == 0) {
        run_usage(stderr);
        return KI_EXIT_USAGE;
    }
    return KI_EXIT_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Expands a directory argument into its image files, sorted by name. */
static int expand_dirs(run_opts *o, char ***owned, int *n_owned)
{
    const char **out = NULL;
    int n = 0;
    for (int i = 0; i < o->n_inputs; i++) {
        struct stat sb;
        if (stat(o->inputs[i], &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            const char **t = realloc(out, (size_t)(n + 1) * sizeof *t);
            if (!t) {
                free(out);
                return KI_EXIT_FAIL;
            }
            out = t;
            out[n++] = o->inputs[i];
            continue;
        }
        DIR *d = opendir(o->inputs[i]);
        if (!d) {
            ki_cli_error("%s: cannot open directory: %s", o->inputs[i], strerror(errno));
            free(out);
            return KI_EXIT_FAIL;
        }
        int first = n;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (!ki_image_is_image_path(e->d_name)) {
                continue;
            }
            size_t len = strlen(o->inputs[i]) + strlen(e->d_name) + 2;
            char *p = malloc(len);
            const char **t = realloc(out, (size_t)(n + 1) * sizeof *t);
            char **ow = realloc(*owned, (size_t)(*n_owned + 1) * sizeof *ow);
            if (ow) {
                *owned = ow;
            }
            if (!p || !t || !ow) {
                free(p);
                free(t ? (void *)t : (void *)out);
                closedir(d);
                return KI_EXIT_FAIL;
            }
            snprintf(p, len, "%s/%s", o->inputs[i], e->d_name);
            out = t;
            out[n++] = p;
            (*owned)[(*n_owned)++] = p;
        }
        closedir(d);
        qsort(out + first, (size_t)(n - first), sizeof *out, cmp_str);
        if (n == first) {
            ki_cli_error("%s: no images in this directory", o->inputs[i]);
            free(out);
            return KI_EXIT_FAIL;
        }
    }
    free(o->inputs);
    o->inputs = out;
    o->n_inputs = n;
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
    return ki_run_is_detector_shape(&d, true);
}

/* The network size for images: the declared H and W, or for dynamic inputs a detector's
 * KI_RUN_DETECT_SIZE or else the first image's own size. */
static ki_status image_size(const run_opts *o, ki_image_prep *p, const ki_shape *decl, bool detect,
                            ki_error *err)
{
    if (decl->d[2] >= 0 && decl->d[3] >= 0) {
        return KI_OK;
    }
    ki_image_prep probe = *p;
    probe.height = probe.width = 1;
    float one[3];
    ki_image_info info;
    ki_status st = ki_image_load(o->inputs[0], &probe, one, &info, err);
    if (st != KI_OK) {
        return st;
    }
    p->height = decl->d[2] >= 0 ? (int)decl->d[2] : detect ? KI_RUN_DETECT_SIZE : info.orig_h;
    p->width = decl->d[3] >= 0 ? (int)decl->d[3] : detect ? KI_RUN_DETECT_SIZE : info.orig_w;
    return KI_OK;
}

static ki_status image_batch(const run_opts *o, const ki_model *m, input_buf *ib,
                             ki_detect_map *maps, ki_error *err)
{
    ki_shape decl = ki_model_input_decl(m, 0);
    char buf[128];
    if (decl.ndim != 4 || decl.d[1] < 0) {
        return KI_FAIL(err, KI_ERR_SHAPE,
                       "input 0 has shape %s: images need an (N,C,H,W) input with a known C; give "
                       "a .npy instead",
                       decl.ndim < 0 ? "(unannotated)" : ki_shape_str(&decl, buf, sizeof buf));
    }
    bool detect = wants_detect(o, m);
    ki_image_prep p = { (int)decl.d[1],         (int)decl.d[2], (int)decl.d[3],
                        o->letterbox || detect, { 0 },          { 0 } };
    memcpy(p.mean, o->mean, sizeof p.mean);
    memcpy(p.std, o->std, sizeof p.std);
    ki_status st = image_size(o, &p, &decl, detect, err);
    int64_t d[4] = { o->n_inputs, p.channels, p.height, p.width };
    ib->shape = ki_shape_make(4, d);
    st = st == KI_OK ? ki_shape_check(&ib->shape, err) : st;
    if (st != KI_OK) {
        return st;
    }
    size_t per = (size_t)p.channels * (size_t)p.height * (size_t)p.width;
    ib->data = malloc(per * (size_t)o->n_inputs * sizeof(float));
    if (!ib->data) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory for %d images", o->n_inputs);
    }
    bool progress = isatty(2) && o->n_inputs >= 16;
    for (int i = 0; i < o->n_inputs; i++) {
        ki_image_info info;
        st = ki_image_load(o->inputs[i], &p, ib->data + per * (size_t)i, &info, err);
        if (st != KI_OK) {
            return st;
        }
        maps[i] = ki_detect_map_image(&p, &info);
        if (progress && (i % 16 == 15 || i + 1 == o->n_inputs)) {
            fprintf(stderr, "\rkinfer: decoded %d/%d images", i + 1, o->n_inputs);
        }
    }
    if (progress) {
        fputc('\n', stderr);
    }
    return KI_OK;
}

static ki_status load_inputs(const run_opts *o, const ki_model *m, input_buf *ib,
                             ki_detect_map *maps, bool *images, ki_error *err)
{
    int need = ki_model_n_inputs(m);
    bool all_images = true;
    for (int i = 0; i < o->n_inputs; i++) {
        all_images = all_images && !strstr(o->inputs[i], ".npy");
    }
    *images = need == 1 && all_images;
    if (*images) {
        return image_batch(o, m, &ib[0], maps, err);
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

static ki_status save_outputs(const run_opts *o, const ki_model *m, const ki_session *s,
                              ki_error *err)
{
    if (mkdir(o->save_dir, 0777) != 0 && errno != EEXIST) {
        return KI_FAIL(err, KI_ERR_IO, "%s: cannot create directory: %s", o->save_dir,
                       strerror(errno));
    }
    size_t len = strlen(o->save_dir) + 32;
    char *path = malloc(len);
    if (!path) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    ki_status st = KI_OK;
    for (int i = 0; i < ki_model_n_outputs(m) && st == KI_OK; i++) {
        ki_tensor t = ki_session_output(s, i);
        snprintf(path, len, "%s/out%d.npy", o->save_dir, i);
        st = ki_npy_write(path, &t.shape, t.data, err);
    }
    /* the inputs as the model saw them (after image preprocessing), to re-run or compare */
    for (int i = 0; i < ki_model_n_inputs(m) && st == KI_OK; i++) {
        ki_tensor t = ki_session_input(s, i);
        snprintf(path, len, "%s/in%d.npy", o->save_dir, i);
        st = ki_npy_write(path, &t.shape, t.data, err);
    }
    /* all or nothing: a failed write removes what this run already wrote */
    for (int i = 0; st != KI_OK && i < ki_model_n_outputs(m) + ki_model_n_inputs(m); i++) {
        bool is_out = i < ki_model_n_outputs(m);
        snprintf(path, len, "%s/%s%d.npy", o->save_dir, is_out ? "out" : "in",
                 is_out ? i : i - ki_model_n_outputs(m));
        remove(path);
    }
    free(path);
    return st;
}

/* Plans a session for the loaded inputs, copies them in and runs it. */
static ki_status run_session(const run_opts *o, const ki_model *m, const input_buf *ib,
                             ki_session **out, ki_error *err)
{
    int n_in = ki_model_n_inputs(m);
    ki_shape *shapes = calloc((size_t)n_in + 1, sizeof *shapes);
    if (!shapes) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < n_in; i++) {
        shapes[i] = ib[i].shape;
    }
    ki_session_options so = { o->threads,
                              o->memory_limit ? o->memory_limit : ki_cli_memory_available() };
    ki_status st = ki_session_create(m, shapes, n_in, &so, out, err);
    free(shapes);
    for (int i = 0; st == KI_OK && i < n_in; i++) {
        ki_tensor t = ki_session_input(*out, i);
        memcpy(t.data, ib[i].data, (size_t)ki_shape_count(&t.shape) * sizeof(float));
    }
    if (st == KI_OK && o->verbose) {
        fprintf(stderr, "kinfer: %.1f MiB of weights, %.1f MiB of planned tensor memory\n",
                (double)ki_model_weight_bytes(m) / (1 << 20),
                (double)ki_session_planned_bytes(*out) / (1 << 20));
    }
    if (st == KI_OK) {
        st = ki_session_run(*out, err);
    }
    if (st == KI_OK && o->verbose) {
        fprintf(stderr, "kinfer: peak resident memory %.1f MiB\n",
                (double)ki_cli_peak_rss() / (1 << 20));
    }
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
    if (!o->draw) {
        return KI_EXIT_OK;
    }
    static const char *const exts[] = { ".jpg", ".jpeg", ".png", ".bmp", ".tga" };
    const char *slash = strrchr(o->draw, '/'), *dot = strrchr(o->draw, '.');
    bool known = false;
    for (size_t i = 0; dot && (!slash || dot > slash) && i < sizeof exts / sizeof *exts; i++) {
        known = known || strcasecmp(dot, exts[i]) == 0;
    }
    if (!known) {
        ki_cli_error("run: --draw %s: the file name must end in .jpg, .jpeg, .png, .bmp or .tga",
                     o->draw);
        return KI_EXIT_USAGE;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - o->draw) + (slash == o->draw) : 1,
             slash ? o->draw : ".");
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        ki_cli_error("run: --draw %s: directory %s does not exist", o->draw, dir);
        return KI_EXIT_USAGE;
    }
    if (!dir_writable(dir, why, sizeof why)) {
        ki_cli_error("run: --draw %s: cannot write in %s: %s", o->draw, dir, why);
        return KI_EXIT_USAGE;
    }
    return KI_EXIT_OK;
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
    if (lb->names && out.ndim == 2 && out.d[1] > 0 && out.d[1] != lb->n) {
        fprintf(stderr,
                "kinfer: warning: --labels %s has %d names but the model has %lld classes\n",
                o->labels_path, lb->n, (long long)out.d[1]);
    }
    if (o->draw && !ki_run_is_detector_shape(&out, true) &&
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
    ki_session *s = NULL;
    labels lb = { NULL, 0 };
    bool images = false;
    input_buf *ib = calloc((size_t)o->n_inputs + 1, sizeof *ib);
    ki_detect_map *maps = calloc((size_t)o->n_inputs + 1, sizeof *maps);
    ki_status st = ib && maps ? KI_OK : KI_FAIL(&err, KI_ERR_NOMEM, "out of memory");
    if (st == KI_OK) {
        st = ki_model_load(o->param, o->bin, NULL, &m, &err);
    }
    if (st == KI_OK && o->labels_path) {
        st = ki_labels_load(o->labels_path, &lb, &err);
    }
    int usage = st == KI_OK ? check_against_model(o, m, &lb) : KI_EXIT_OK;
    if (usage != KI_EXIT_OK) {
        free(ib);
        free(maps);
        ki_labels_free(&lb);
        ki_model_destroy(m);
        return usage;
    }
    if (st == KI_OK) {
        st = load_inputs(o, m, ib, maps, &images, &err);
    }
    if (st == KI_OK && o->draw && !images) {
        st = KI_FAIL(&err, KI_ERR_UNSUPPORTED, "--draw needs image inputs");
    }
    if (st == KI_OK) {
        st = run_session(o, m, ib, &s, &err);
    }
    if (st == KI_OK && o->save_dir) {
        st = save_outputs(o, m, s, &err);
    }
    if (st == KI_OK) {
        run_sources src = { o->inputs, o->n_inputs, images ? maps : NULL };
        st = ki_run_print(o, m, s, &lb, &src, &err);
    }
    if (st != KI_OK) {
        ki_cli_error("%s", err.msg);
    }
    for (int i = 0; ib && i < o->n_inputs; i++) {
        free(ib[i].data);
    }
    free(ib);
    free(maps);
    ki_labels_free(&lb);
    ki_session_destroy(s);
    ki_model_destroy(m);
    return st == KI_OK ? KI_EXIT_OK : KI_EXIT_FAIL;
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
