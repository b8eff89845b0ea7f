/* run_output.c - presenting the outputs of `kinfer run`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "npy.h"
#include "run_opts.h"
#include "segment.h"

#define MAX_LABELS      100000
#define MAX_LABELS_FILE ((size_t)16 << 20)

ki_status ki_labels_load(const char *path, labels *lb, ki_error *err)
{
    unsigned char *buf;
    size_t len;
    ki_status st = ki_file_read(path, MAX_LABELS_FILE, &buf, &len, err);
    if (st != KI_OK) {
        return st;
    }
    lb->names = calloc(MAX_LABELS, sizeof *lb->names);
    lb->n = 0;
    size_t start = 0;
    for (size_t i = 0; lb->names && i <= len && lb->n < MAX_LABELS; i++) {
        if (i == len || buf[i] == '\n') {
            size_t end = i;
            if (end > start && buf[end - 1] == '\r') {
                end--;
            }
            if (i == len && end == start) {
                break;
            }
            lb->names[lb->n] = strndup((const char *)buf + start, end - start);
            if (!lb->names[lb->n]) {
                break;
            }
            lb->n++;
            start = i + 1;
        }
    }
    free(buf);
    if (!lb->names) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    return KI_OK;
}

void ki_labels_free(labels *lb)
{
    for (int i = 0; lb->names && i < lb->n; i++) {
        free(lb->names[i]);
    }
    free(lb->names);
    lb->names = NULL;
    lb->n = 0;
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            printf("\\%c", c);
        } else if (c < 0x20) {
            printf("\\u%04x", c);
        } else {
            putchar(c);
        }
    }
    putchar('"');
}

/* A CSV field (RFC 4180): quoted, with quotes doubled, when it holds a comma, quote or newline. */
static void csv_string(const char *str)
{
    if (!strpbrk(str, ",\"\r\n")) {
        fputs(str, stdout);
        return;
    }
    putchar('"');
    for (const char *c = str; *c; c++) {
        if (*c == '"') {
            putchar('"');
        }
        putchar(*c);
    }
    putchar('"');
}

typedef enum run_task { TASK_RAW, TASK_CLASSIFY, TASK_DETECT, TASK_SEGMENT } run_task;

int ki_run_detector_layout(const ki_shape *s, bool allow_unknown)
{
    if (s->ndim != 3) {
        return 0;
    }
    const int64_t a = s->d[1], b = s->d[2];
    if (a >= 5 && ((b >= 100 && a < b) || (allow_unknown && b < 0 && a <= 1000))) {
        return 8;
    }
    return b >= 6 && (a >= 100 || (allow_unknown && a < 0)) ? 5 : 0;
}

static run_task pick_task(const run_opts *o, const ki_session *s, const ki_model *m)
{
    if (o->task) {
        return strcmp(o->task, "classify") == 0  ? TASK_CLASSIFY
               : strcmp(o->task, "detect") == 0  ? TASK_DETECT
               : strcmp(o->task, "segment") == 0 ? TASK_SEGMENT
                                                 : TASK_RAW;
    }
    ki_tensor t = ki_session_output(s, 0), x = ki_session_input(s, 0);
    if (ki_run_detector_layout(&t.shape, false)) {
        return TASK_DETECT;
    }
    if (t.shape.ndim == 4 && t.shape.d[1] >= 2 && t.shape.d[1] <= KI_SEGMENT_MAX_CLASSES &&
        x.shape.ndim == 4 && x.shape.d[2] == t.shape.d[2] && x.shape.d[3] == t.shape.d[3]) {
        return TASK_SEGMENT; /* a class score per input pixel */
    }
    bool cls = ki_model_n_outputs(m) == 1 && t.shape.ndim == 2 && t.shape.d[1] > 1;
    return cls ? TASK_CLASSIFY : TASK_RAW;
}

/* How a classifier's outputs become scores: softmax of logits, as they are (the graph already
 * ends in softmax, or --scores raw), or exp of log-probabilities (log_softmax). */
typedef enum score_kind { SCORE_SOFTMAX, SCORE_AS_IS, SCORE_EXP } score_kind;

/* What the operator producing model output 0 says about its values. */
static score_kind output_scores(const run_opts *o, const ki_model *m)
{
    if (o->scores) {
        return strcmp(o->scores, "raw") == 0 ? SCORE_AS_IS : SCORE_SOFTMAX;
    }
    const char *out = ki_model_output_name(m, 0);
    for (int i = 0; out && i < ki_model_n_ops(m); i++) {
        const ki_op_desc *d = ki_model_op(m, i);
        for (int j = 0; j < d->n_outputs; j++) {
            if (strcmp(d->output_names[j], out) != 0) {
                continue;
            }
            if (strcmp(d->type, "F.softmax") == 0 || strcmp(d->type, "nn.Softmax") == 0 ||
                strcmp(d->type, "torch.softmax") == 0) {
                return SCORE_AS_IS;
            }
            if (strcmp(d->type, "F.log_softmax") == 0 || strcmp(d->type, "nn.LogSoftmax") == 0 ||
                strcmp(d->type, "torch.log_softmax") == 0) {
                return SCORE_EXP;
            }
            return SCORE_SOFTMAX;
        }
    }
    return SCORE_SOFTMAX;
}

/* Top-k of one row with its scores (softmax: stable, the max subtracted). */
static void print_row_topk(const run_opts *o, score_kind sk, const float *row, int64_t k,
                           const labels *lb, const char *src, int idx, bool last)
{
    float mx = row[0];
    for (int64_t j = 1; j < k; j++) {
        mx = row[j] > mx ? row[j] : mx;
    }
    double sum = 0;
    for (int64_t j = 0; j < k; j++) {
        sum += exp((double)(row[j] - mx));
    }
    int top = o->topk < k ? o->topk : (int)k;
    int *best = calloc((size_t)top, sizeof *best);
    for (int t = 0; best && t < top; t++) {
        int64_t b = -1;
        for (int64_t j = 0; j < k; j++) {
            bool used = false;
            for (int u = 0; u < t && !used; u++) {
                used = best[u] == j;
            }
            if (!used && (b < 0 || row[j] > row[b])) {
                b = j;
            }
        }
        best[t] = (int)b;
    }
    if (o->json || o->jsonl) {
        printf("%s{\"input\": ", o->jsonl ? "" : "    ");
        json_string(src);
        printf(", \"index\": %d, \"top\": [", idx);
    } else if (!o->csv) {
        printf("%s:\n", src);
    }
    for (int t = 0; best && t < top; t++) {
        double v = row[best[t]];
        double p = sk == SCORE_AS_IS ? v : sk == SCORE_EXP ? exp(v) : exp(v - mx) / sum;
        const char *name = (lb->names && best[t] < lb->n) ? lb->names[best[t]] : NULL;
        if (o->csv) {
            csv_string(src);
            printf(",%d,%d,%d,%.6g,%.6g,", idx, t + 1, best[t], p, row[best[t]]);
            csv_string(name ? name : "");
            putchar('\n');
        } else if (o->json || o->jsonl) {
            printf("%s{\"class\": %d, \"score\": %.6f, \"logit\": %.6g", t ? ", " : "", best[t], p,
                   row[best[t]]);
            if (name) {
                printf(", \"label\": ");
                json_string(name);
            }
            printf("}");
        } else {
            if (sk == SCORE_AS_IS && o->scores) { /* --scores raw: the values themselves */
                printf("  %d. class %-5d %10.4g  %s\n", t + 1, best[t], p, name ? name : "");
            } else {
                printf("  %d. class %-5d %6.2f%%  %s\n", t + 1, best[t], 100.0 * p,
                       name ? name : "");
            }
        }
    }
    if (o->json || o->jsonl) {
        printf("]}%s\n", last || o->jsonl ? "" : ",");
    }
    free(best);
}

static void print_stats(const run_opts *o, const ki_model *m, const ki_session *s, bool last)
{
    char buf[128];
    for (int i = 0; i < ki_model_n_outputs(m); i++) {
        ki_tensor t = ki_session_output(s, i);
        int64_t n = ki_shape_count(&t.shape);
        double mn = INFINITY, mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < n; j++) {
            mn = t.data[j] < mn ? t.data[j] : mn;
            mx = t.data[j] > mx ? t.data[j] : mx;
            sum += t.data[j];
        }
        double mean = n ? sum / (double)n : 0;
        if (o->csv) {
            printf("%d,", i);
            csv_string(ki_model_output_name(m, i));
            putchar(',');
            for (int d = 0; d < t.shape.ndim; d++) {
                printf("%s%lld", d ? "x" : "", (long long)t.shape.d[d]);
            }
            printf(",%.6g,%.6g,%.6g\n", mn, mx, mean);
        } else if (o->json || o->jsonl) {
            printf("%s{\"output\": %d, \"name\": ", o->jsonl ? "" : "    ", i);
            json_string(ki_model_output_name(m, i));
            printf(", \"shape\": [");
            for (int d = 0; d < t.shape.ndim; d++) {
                printf("%s%lld", d ? ", " : "", (long long)t.shape.d[d]);
            }
            printf("], \"min\": %.6g, \"max\": %.6g, \"mean\": %.6g}%s\n", mn, mx, mean,
                   o->jsonl || (last && i + 1 == ki_model_n_outputs(m)) ? "" : ",");
        } else {
            printf("out%d  %-10s shape %-20s min %-12.6g max %-12.6g mean %.6g\n", i,
                   ki_model_output_name(m, i), ki_shape_str(&t.shape, buf, sizeof buf), mn, mx,
                   mean);
        }
    }
}

/* "out.jpg" for one image; "out_3.jpg" for image 3 of several. */
static void draw_path(const char *draw, int idx, int n, char *buf, size_t size)
{
    const char *dot = strrchr(draw, '.'), *slash = strrchr(draw, '/');
    if (n <= 1) {
        snprintf(buf, size, "%s", draw);
    } else if (!dot || (slash && dot < slash)) {
        snprintf(buf, size, "%s_%d", draw, idx);
    } else {
        snprintf(buf, size, "%.*s_%d%s", (int)(dot - draw), draw, idx, dot);
    }
}

static void print_dets(const run_opts *o, const ki_det *d, int n, const labels *lb, const char *src,
                       int idx, bool last)
{
    const bool js = o->json || o->jsonl;
    if (o->csv) {
        for (int i = 0; i < n; i++) {
            const char *name = lb->names && d[i].cls < lb->n ? lb->names[d[i].cls] : "";
            csv_string(src);
            printf(",%d,%d,", idx, d[i].cls);
            csv_string(name);
            printf(",%.4f,%.1f,%.1f,%.1f,%.1f\n", (double)d[i].score, (double)d[i].x1,
                   (double)d[i].y1, (double)d[i].x2, (double)d[i].y2);
        }
        return;
    }
    if (js) {
        printf("%s{\"input\": ", o->jsonl ? "" : "    ");
        json_string(src);
        printf(", \"index\": %d, \"detections\": [", idx);
    } else {
        printf("%s: %d detection%s\n", src, n, n == 1 ? "" : "s");
    }
    for (int i = 0; i < n; i++) {
        const char *name = lb->names && d[i].cls < lb->n ? lb->names[d[i].cls] : NULL;
        if (js) {
            printf("%s%s{\"class\": %d, ", i ? "," : "", o->jsonl ? (i ? " " : "") : "\n      ",
                   d[i].cls);
            if (name) {
                printf("\"label\": ");
                json_string(name);
                printf(", ");
            }
            printf("\"score\": %.4f, \"box\": [%.1f, %.1f, %.1f, %.1f]}", (double)d[i].score,
                   (double)d[i].x1, (double)d[i].y1, (double)d[i].x2, (double)d[i].y2);
        } else {
            char id[32];
            snprintf(id, sizeof id, "class %d", d[i].cls);
            printf("  %-16s %.3f %8.1f %8.1f %8.1f %8.1f\n", name ? name : id, (double)d[i].score,
                   (double)d[i].x1, (double)d[i].y1, (double)d[i].x2, (double)d[i].y2);
        }
    }
    if (js) {
        printf("%s]}%s\n", n && !o->jsonl ? "\n    " : "", last || o->jsonl ? "" : ",");
    }
}

/* One image's detections: filter, NMS, back to original pixels, print, draw. */
static ki_status detect_image(const run_opts *o, const ki_tensor *t, int layout, int64_t r,
                              const labels *lb, const run_sources *src, ki_det *buf, ki_error *err)
{
    const bool v8 = layout == 8;
    const int64_t boxes = t->shape.d[v8 ? 2 : 1], no = t->shape.d[v8 ? 1 : 2];
    const char *path = r < src->n ? src->paths[r] : src->paths[0];
    const int idx = src->first + (int)r;
    const float *rows = t->data + r * boxes * no;
    int n = v8 ? ki_detect_candidates_v8(rows, boxes, (int)no, o->conf, buf, (int)boxes)
               : ki_detect_candidates(rows, boxes, (int)no, o->conf, buf, (int)boxes);
    /* ultralytics' YOLOv8 suppresses at IoU 0.7, YOLOv5 at 0.45 */
    n = ki_detect_nms(buf, n, o->have_iou ? o->iou : v8 ? 0.7f : 0.45f, o->max_det);
    if (src->maps && r < src->n) {
        ki_detect_unmap(buf, n, &src->maps[r]);
    }
    n = ki_detect_drop_empty(buf, n); /* clipped to the image, some have no area left */
    print_dets(o, buf, n, lb, path, idx, idx + 1 >= src->total);
    if (!o->draw) {
        return KI_OK;
    }
    if (!src->maps) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "--draw needs image inputs");
    }
    char out[4096];
    draw_path(o->draw, idx, src->total, out, sizeof out);
    return ki_detect_draw_file(path, out, buf, n, (const char *const *)lb->names, lb->n, err);
}

static ki_status print_detections(const run_opts *o, const ki_session *s, const labels *lb,
                                  const run_sources *src, ki_error *err)
{
    ki_tensor t = ki_session_output(s, 0);
    char b[128];
    int layout = ki_run_detector_layout(&t.shape, false);
    if (!layout && t.shape.ndim == 3 && t.shape.d[2] >= 6) {
        layout = 5; /* --task detect on fewer boxes */
    }
    const int64_t boxes = layout == 8 ? t.shape.d[2] : t.shape.d[1];
    if (!layout || boxes > INT32_MAX) {
        return KI_FAIL(err, KI_ERR_SHAPE,
                       "output 0 has shape %s, not (N, boxes, 5 + classes) or (N, 4 + classes, "
                       "boxes)",
                       ki_shape_str(&t.shape, b, sizeof b));
    }
    const int64_t classes = layout == 8 ? t.shape.d[1] - 4 : t.shape.d[2] - 5;
    ki_det *buf = malloc(((size_t)boxes + 1) * sizeof *buf);
    if (!buf) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    ki_status st = KI_OK;
    /* an 80-class detector without --labels: the COCO names it was almost surely trained on */
    labels coco = { (char **)ki_coco_names, KI_COCO_CLASSES };
    const labels *use = !lb->names && classes == KI_COCO_CLASSES ? &coco : lb;
    for (int64_t r = 0; r < t.shape.d[0] && st == KI_OK; r++) {
        st = detect_image(o, &t, layout, r, use, src, buf, err);
    }
    free(buf);
    return st;
}

/* One image's class map: the share of each class (the topk largest) printed, the map written as
 * a palette PNG (--mask) and over the image (--draw), at the image's size when it came from
 * one. map has room for the network's pixels. */
static ki_status segment_image(const run_opts *o, const ki_tensor *t, int64_t r, const labels *lb,
                               const run_sources *src, uint8_t *map, ki_error *err)
{
    const int64_t c = t->shape.d[1], h = t->shape.d[2], w = t->shape.d[3];
    const char *path = r < src->n ? src->paths[r] : src->paths[0];
    const int idx = src->first + (int)r;
    ki_segment_argmax(t->data + r * c * h * w, c, h * w, map);
    int64_t count[KI_SEGMENT_MAX_CLASSES] = { 0 };
    for (int64_t p = 0; p < h * w; p++) {
        count[map[p]]++;
    }
    const bool js = o->json || o->jsonl;
    if (js) {
        printf("%s{\"input\": ", o->jsonl ? "" : "    ");
        json_string(path);
        printf(", \"index\": %d, \"segments\": [", idx);
    } else if (!o->csv) {
        printf("%s: %lldx%lld, %lld classes\n", path, (long long)w, (long long)h, (long long)c);
    }
    bool shown[KI_SEGMENT_MAX_CLASSES] = { false };
    for (int rank = 0; rank < o->topk; rank++) {
        int best = -1;
        for (int k = 0; k < c; k++) {
            best = !shown[k] && count[k] > 0 && (best < 0 || count[k] > count[best]) ? k : best;
        }
        if (best < 0) {
            break;
        }
        shown[best] = true;
        const double f = (double)count[best] / (double)(h * w);
        const char *name = lb->names && best < lb->n ? lb->names[best] : NULL;
        if (o->csv) {
            csv_string(path);
            printf(",%d,%d,%d,%.6f,", idx, rank + 1, best, f);
            csv_string(name ? name : "");
            putchar('\n');
        } else if (js) {
            printf("%s{\"class\": %d, \"fraction\": %.6f", rank ? ", " : "", best, f);
            if (name) {
                printf(", \"label\": ");
                json_string(name);
            }
            printf("}");
        } else {
            printf("  %d. class %-5d %6.2f%%  %s\n", rank + 1, best, 100.0 * f, name ? name : "");
        }
    }
    if (js) {
        printf("]}%s\n", idx + 1 >= src->total || o->jsonl ? "" : ",");
    }
    if (!o->mask && !o->draw) {
        return KI_OK;
    }
    /* the class of each of the image's own pixels (nearest network pixel) */
    const ki_detect_map *mp = src->maps && r < src->n ? &src->maps[r] : NULL;
    if (o->draw && !mp) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "--draw needs image inputs");
    }
    int iw = mp ? mp->width : (int)w, ih = mp ? mp->height : (int)h;
    uint8_t *img = mp ? malloc((size_t)iw * (size_t)ih) : map;
    if (!img) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory for a %dx%d class map", iw, ih);
    }
    if (mp) {
        ki_segment_unmap(map, (int)w, (int)h, mp, img);
    }
    char out[4096];
    ki_status st = KI_OK;
    if (o->mask) {
        draw_path(o->mask, idx, src->total, out, sizeof out);
        st = ki_segment_write_png(out, img, iw, ih, err);
    }
    if (st == KI_OK && o->draw) {
        draw_path(o->draw, idx, src->total, out, sizeof out);
        st = ki_segment_overlay_file(path, out, img, iw, ih, err);
    }
    if (img != map) {
        free(img);
    }
    return st;
}

static ki_status print_segments(const run_opts *o, const ki_session *s, const labels *lb,
                                const run_sources *src, ki_error *err)
{
    ki_tensor t = ki_session_output(s, 0);
    char b[128];
    if (t.shape.ndim != 4 || t.shape.d[1] < 1 || t.shape.d[1] > KI_SEGMENT_MAX_CLASSES) {
        return KI_FAIL(err, KI_ERR_SHAPE, "output 0 has shape %s, not (N, 1..%d classes, H, W)",
                       ki_shape_str(&t.shape, b, sizeof b), KI_SEGMENT_MAX_CLASSES);
    }
    uint8_t *map = malloc((size_t)(t.shape.d[2] * t.shape.d[3]) + 1);
    if (!map) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory for a class map");
    }
    ki_status st = KI_OK;
    for (int64_t r = 0; r < t.shape.d[0] && st == KI_OK; r++) {
        st = segment_image(o, &t, r, lb, src, map, err);
    }
    free(map);
    return st;
}

void ki_run_print_begin(const run_opts *o, const ki_model *m, const ki_session *s)
{
    static const char *const names[] = { "raw", "classify", "detect", "segment" };
    static const char *const csv_headers[] = { "output,name,shape,min,max,mean",
                                               "input,index,rank,class,score,logit,label",
                                               "input,index,class,label,score,x1,y1,x2,y2",
                                               "input,index,rank,class,fraction,label" };
    if (o->csv) {
        printf("%s\n", csv_headers[pick_task(o, s, m)]);
    }
    if (o->json && !o->jsonl) {
        printf("{\n  \"model\": ");
        json_string(o->param);
        printf(",\n  \"task\": \"%s\",\n  \"results\": [\n", names[pick_task(o, s, m)]);
    }
}

void ki_run_print_end(const run_opts *o)
{
    if (o->json && !o->jsonl) {
        printf("  ]\n}\n");
    }
    fflush(stdout);
}

ki_status ki_run_print(const run_opts *o, const ki_model *m, const ki_session *s, const labels *lb,
                       const run_sources *src, ki_error *err)
{
    run_task task = pick_task(o, s, m);
    ki_status st = KI_OK;
    if (task == TASK_CLASSIFY) {
        ki_tensor t = ki_session_output(s, 0);
        int64_t rows = t.shape.ndim == 2 ? t.shape.d[0] : 1;
        int64_t k = ki_shape_count(&t.shape) / (rows ? rows : 1);
        const score_kind sk = output_scores(o, m);
        for (int64_t r = 0; r < rows; r++) {
            const char *p = r < src->n ? src->paths[r] : src->paths[0];
            const int idx = src->first + (int)r;
            print_row_topk(o, sk, t.data + r * k, k, lb, p, idx, idx + 1 >= src->total);
        }
    } else if (task == TASK_DETECT) {
        st = print_detections(o, s, lb, src, err);
    } else if (task == TASK_SEGMENT) {
        st = print_segments(o, s, lb, src, err);
    } else {
        print_stats(o, m, s, src->last_batch);
    }
    return st;
}
