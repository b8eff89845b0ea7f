/* cmd_run.c - `kinfer run MODEL.pnnx.param MODEL.pnnx.bin INPUT... [options]`. */
#include "commands.h"
#include "image.h"
#include "npy.h"
#include "run_opts.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void run_usage(FILE *f)
{
    fprintf(f,
            "usage: kinfer run MODEL.pnnx.param MODEL.pnnx.bin INPUT... [options]\n"
            "\n"
            "INPUT is a .npy tensor or an image (PNG, JPEG, BMP, GIF, ...), one per model input in\n"
            "file order. For a single-input model, several images or a directory of images form one\n"
            "batch. Images are converted to the input's channel count, resized (bilinear) to its HxW,\n"
            "scaled to [0,1] and normalised with --mean/--std.\n"
            "\n"
            "options:\n"
            "  --save-dir DIR     write each output as DIR/out0.npy, out1.npy, ... (float32)\n"
            "  --threads N        threads to use (default: all cores, here %d)\n"
            "  --topk K           classes to show for a classifier (default 5)\n"
            "  --labels FILE      class names, one a line\n"
            "  --mean a,b,c       per-channel mean subtracted after scaling (default 0)\n"
            "  --std a,b,c        per-channel divisor (default 1)\n"
            "  --imagenet         --mean 0.485,0.456,0.406 --std 0.229,0.224,0.225\n"
            "  --letterbox        keep the aspect ratio, pad with 114/255\n"
            "  --task T           classify | raw: how to present outputs (default: automatic)\n"
            "  --json             machine-readable results on stdout\n"
            "  --verbose          report planned tensor memory and timings on stderr\n",
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

static int parse_args(int argc, char **argv, run_opts *o)
{
    static const float imean[3] = { 0.485f, 0.456f, 0.406f }, istd[3] = { 0.229f, 0.224f, 0.225f };
    long v;
    int npos = 0;
    o->threads = ki_cli_default_threads();
    o->topk = 5;
    for (int i = 0; i < 3; i++) {
        o->mean[i] = 0.0f;
        o->std[i] = 1.0f;
    }
    o->inputs = calloc((size_t)argc, sizeof *o->inputs);
    if (!o->inputs) {
        return KI_EXIT_FAIL;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            run_usage(stdout);
            return -1;
        } else if (strcmp(a, "--json") == 0) {
            o->json = true;
        } else if (strcmp(a, "--letterbox") == 0) {
            o->letterbox = true;
        } else if (strcmp(a, "--verbose") == 0) {
            o->verbose = true;
        } else if (strcmp(a, "--imagenet") == 0) {
            memcpy(o->mean, imean, sizeof imean);
            memcpy(o->std, istd, sizeof istd);
        } else if (next && strcmp(a, "--save-dir") == 0) {
            o->save_dir = argv[++i];
        } else if (next && strcmp(a, "--labels") == 0) {
            o->labels_path = argv[++i];
        } else if (next && strcmp(a, "--task") == 0 &&
                   (strcmp(next, "classify") == 0 || strcmp(next, "raw") == 0)) {
            o->task = argv[++i];
        } else if (next && strcmp(a, "--threads") == 0 && ki_cli_parse_int(next, 1, 1024, &v)) {
            o->threads = (int)v;
            i++;
        } else if (next && strcmp(a, "--topk") == 0 && ki_cli_parse_int(next, 1, 1000000, &v)) {
            o->topk = (int)v;
            i++;
        } else if (next && strcmp(a, "--mean") == 0 && parse_floats3(next, o->mean)) {
            i++;
        } else if (next && strcmp(a, "--std") == 0 && parse_floats3(next, o->std) &&
                   o->std[0] != 0 && o->std[1] != 0 && o->std[2] != 0) {
            i++;
        } else if (a[0] == '-' && a[1] != '\0') {
            ki_cli_error("run: bad option or value: '%s%s%s'", a, next ? " " : "", next ? next : "");
            return KI_EXIT_USAGE;
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

static ki_status image_batch(const run_opts *o, const ki_model *m, input_buf *ib, ki_error *err)
{
    ki_shape decl = ki_model_input_decl(m, 0);
    char buf[128];
    if (decl.ndim != 4 || decl.d[1] < 0) {
        return KI_FAIL(err, KI_ERR_SHAPE,
                       "input 0 has shape %s: images need an (N,C,H,W) input with a known C; give a .npy instead",
                       decl.ndim < 0 ? "(unannotated)" : ki_shape_str(&decl, buf, sizeof buf));
    }
    ki_image_prep p = { (int)decl.d[1], (int)decl.d[2], (int)decl.d[3], o->letterbox, { 0 }, { 0 } };
    memcpy(p.mean, o->mean, sizeof p.mean);
    memcpy(p.std, o->std, sizeof p.std);
    if (decl.d[2] < 0 || decl.d[3] < 0) {
        /* dynamic resolution: take the first image's own size */
        ki_image_prep probe = p;
        probe.height = probe.width = 1;
        float one[3];
        ki_image_info info;
        ki_status st = ki_image_load(o->inputs[0], &probe, one, &info, err);
        if (st != KI_OK) {
            return st;
        }
        p.height = decl.d[2] < 0 ? info.orig_h : (int)decl.d[2];
        p.width = decl.d[3] < 0 ? info.orig_w : (int)decl.d[3];
    }
    int64_t d[4] = { o->n_inputs, p.channels, p.height, p.width };
    ib->shape = ki_shape_make(4, d);
    ki_status st = ki_shape_check(&ib->shape, err);
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
        if (progress && (i % 16 == 15 || i + 1 == o->n_inputs)) {
            fprintf(stderr, "\rkinfer: decoded %d/%d images", i + 1, o->n_inputs);
        }
    }
    if (progress) {
        fputc('\n', stderr);
    }
    return KI_OK;
}

static ki_status load_inputs(const run_opts *o, const ki_model *m, input_buf *ib, ki_error *err)
{
    int need = ki_model_n_inputs(m);
    bool all_images = true;
    for (int i = 0; i < o->n_inputs; i++) {
        all_images = all_images && !strstr(o->inputs[i], ".npy");
    }
    if (need == 1 && all_images) {
        return image_batch(o, m, &ib[0], err);
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
        return KI_FAIL(err, KI_ERR_IO, "%s: cannot create directory: %s", o->save_dir, strerror(errno));
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
    free(path);
    return st;
}

static int run_model(const run_opts *o, char **owned, int n_owned)
{
    ki_error err;
    ki_model *m = NULL;
    ki_session *s = NULL;
    labels lb = { NULL, 0 };
    int rc = KI_EXIT_FAIL;
    input_buf *ib = calloc((size_t)o->n_inputs + 1, sizeof *ib);
    ki_shape *shapes = calloc((size_t)o->n_inputs + 1, sizeof *shapes);
    ki_status st = ib && shapes ? KI_OK : KI_FAIL(&err, KI_ERR_NOMEM, "out of memory");
    if (st == KI_OK) {
        st = ki_model_load(o->param, o->bin, NULL, &m, &err);
    }
    if (st == KI_OK && o->labels_path) {
        st = ki_labels_load(o->labels_path, &lb, &err);
    }
    if (st == KI_OK) {
        st = load_inputs(o, m, ib, &err);
    }
    int n_in = m ? ki_model_n_inputs(m) : 0;
    for (int i = 0; st == KI_OK && i < n_in; i++) {
        shapes[i] = ib[i].shape;
    }
    ki_session_options so = { o->threads, 0 };
    if (st == KI_OK) {
        st = ki_session_create(m, shapes, n_in, &so, &s, &err);
    }
    for (int i = 0; st == KI_OK && i < n_in; i++) {
        ki_tensor t = ki_session_input(s, i);
        memcpy(t.data, ib[i].data, (size_t)ki_shape_count(&t.shape) * sizeof(float));
    }
    if (st == KI_OK && o->verbose) {
        fprintf(stderr, "kinfer: %.1f MiB of weights, %.1f MiB of planned tensor memory\n",
                (double)ki_model_weight_bytes(m) / (1 << 20), (double)ki_session_planned_bytes(s) / (1 << 20));
    }
    if (st == KI_OK) {
        st = ki_session_run(s, &err);
    }
    if (st == KI_OK && o->save_dir) {
        st = save_outputs(o, m, s, &err);
    }
    if (st == KI_OK) {
        ki_run_print(o, m, s, &lb, o->inputs, o->n_inputs);
        rc = KI_EXIT_OK;
    } else {
        ki_cli_error("%s", err.msg);
    }
    for (int i = 0; ib && i < o->n_inputs; i++) {
        free(ib[i].data);
    }
    free(ib);
    free(shapes);
    ki_labels_free(&lb);
    ki_session_destroy(s);
    ki_model_destroy(m);
    (void)owned, (void)n_owned;
    return rc;
}

int ki_cli_run(int argc, char **argv)
{
    run_opts o;
    memset(&o, 0, sizeof o);
    int rc = parse_args(argc, argv, &o);
    char **owned = NULL;
    int n_owned = 0;
    if (rc == KI_EXIT_OK) {
        rc = expand_dirs(&o, &owned, &n_owned);
    }
    if (rc == KI_EXIT_OK) {
        ki_cli_set_threads(o.threads);
        rc = run_model(&o, owned, n_owned);
    }
    for (int i = 0; i < n_owned; i++) {
        free(owned[i]);
    }
    free(owned);
    free(o.inputs);
    return rc < 0 ? KI_EXIT_OK : rc;
}
