/* run_opts.h - options of `kinfer run`, parsed by cmd_run.c and used by run_output.c. */
#ifndef KI_RUN_OPTS_H
#define KI_RUN_OPTS_H

#include "../core/kinfer.h"
#include "image.h"

#include <stdbool.h>

typedef struct run_opts {
    const char *param, *bin;
    const char **inputs;
    int n_inputs;
    const char *save_dir, *labels_path, *task;
    int threads, topk;
    bool json, letterbox, verbose, have_mean, have_std;
    float mean[3], std[3];
} run_opts;

typedef struct labels {
    char **names;
    int n;
} labels;

/* Prints results (top-k for classifiers, statistics otherwise), text or JSON. */
void ki_run_print(const run_opts *o, const ki_model *m, const ki_session *s, const labels *lb,
                  const char *const *sources, int n_sources);
ki_status ki_labels_load(const char *path, labels *lb, ki_error *err);
void ki_labels_free(labels *lb);

#endif
