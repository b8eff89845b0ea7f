/* run_opts.h - options of `kinfer run`, parsed by cmd_run.c and used by run_output.c. */
#ifndef KI_RUN_OPTS_H
#define KI_RUN_OPTS_H

#include <stdbool.h>

#include "../core/kinfer.h"
#include "detect.h"
#include "image.h"

/* Size an image is letterboxed to for a detector whose input has no fixed H and W. */
#define KI_RUN_DETECT_SIZE 640

typedef struct run_opts {
    const char *param, *bin;
    const char **inputs;
    int n_inputs;
    const char *save_dir, *labels_path, *task, *draw, *mask;
    const char *tokens; /* --tokens 5,17,3, or NULL */
    int threads, topk, max_det;
    const char *isa;    /* --isa, or NULL */
    const char *scores; /* --scores raw|softmax, or NULL: from the graph's last operator */
    float conf, iou;
    bool have_iou; /* --iou given (else 0.45, or 0.7 for a YOLOv8 layout, as ultralytics) */
    bool json, jsonl, csv, letterbox, verbose, have_mean, have_std, imagenet;
    int batch;            /* images per run (--batch) */
    ki_shape input_shape; /* --input-shape, or ndim 0 */
    size_t memory_limit;  /* bytes; 0: what the system has available */
    float mean[3], std[3];
    const char *preprocess;              /* --preprocess torchvision, or NULL */
    int resize_w, resize_h, resize_short; /* --resize WxH or S (0: none) */
    int crop_w, crop_h;                   /* --crop WxH (0: the input's size) */
    bool bgr;                             /* --bgr */
} run_opts;

typedef struct labels {
    char **names;
    int n;
} labels;

/* What the inputs of one batch were: paths[0..n), maps[i] takes image i's network pixels back to
 * its own pixels (NULL when the inputs were .npy files); the batch's first input is input `first`
 * of the `total` of the whole run. */
typedef struct run_sources {
    const char *const *paths;
    int n;
    const ki_detect_map *maps;
    int first, total;
    bool last_batch;
} run_sources;

/* Which detector layout s looks like: 5 for YOLOv5's (N, boxes, 5 + classes) with 5 + classes
 * >= 6 and at least 100 boxes, 8 for YOLOv8's (N, 4 + classes, boxes) with at least 100 boxes,
 * more than values per box (no objectness column), 0 for neither. An unknown (-1) box count
 * passes when allow_unknown (YOLOv8's then needs 5 to 1000 values per box). */
int ki_run_detector_layout(const ki_shape *s, bool allow_unknown);

/* Prints one batch's results (top-k for classifiers, detections for detectors, statistics
 * otherwise) as text, JSON (--json: one document for the whole run, between ki_run_print_begin and
 * ki_run_print_end) or JSON lines (--jsonl: an object per input), and draws detections when
 * o->draw is set. Fails only when drawing fails. */
void ki_run_print_begin(const run_opts *o, const ki_model *m, const ki_session *s);
ki_status ki_run_print(const run_opts *o, const ki_model *m, const ki_session *s, const labels *lb,
                       const run_sources *src, ki_error *err);
void ki_run_print_end(const run_opts *o);
ki_status ki_labels_load(const char *path, labels *lb, ki_error *err);
void ki_labels_free(labels *lb);

#endif
