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
    const char *save_dir, *labels_path, *task, *draw;
    int threads, topk, max_det;
    const char *isa;    /* --isa, or NULL */
    const char *scores; /* --scores raw|softmax, or NULL: from the graph's last operator */
    float conf, iou;
    bool json, letterbox, verbose, have_mean, have_std, imagenet;
    size_t memory_limit; /* bytes; 0: what the system has available */
    float mean[3], std[3];
} run_opts;

typedef struct labels {
    char **names;
    int n;
} labels;

/* What the inputs were: maps[i] takes image i's network pixels back to its own pixels; maps is
 * NULL when the inputs were .npy files. */
typedef struct run_sources {
    const char *const *paths;
    int n;
    const ki_detect_map *maps;
} run_sources;

/* True when s looks like detector output: (N, boxes, 5 + classes) with 5 + classes >= 6 and at
 * least 100 boxes; an unknown (-1) box count passes when allow_unknown. */
bool ki_run_is_detector_shape(const ki_shape *s, bool allow_unknown);

/* Prints results (top-k for classifiers, detections for detectors, statistics otherwise), text
 * or JSON, and draws detections when o->draw is set. Fails only when drawing fails. */
ki_status ki_run_print(const run_opts *o, const ki_model *m, const ki_session *s, const labels *lb,
                       const run_sources *src, ki_error *err);
ki_status ki_labels_load(const char *path, labels *lb, ki_error *err);
void ki_labels_free(labels *lb);

#endif
