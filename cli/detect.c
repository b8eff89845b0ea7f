/* detect.c - confidence filter, class-aware NMS and the way back to original pixels
 * (YOLOv5's non_max_suppression and scale_boxes, with multi_label off). */
#include "detect.h"

#include <math.h>
#include <stdlib.h>

int ki_detect_candidates(const float *rows, int64_t n_rows, int no, float conf, ki_det *out,
                         int max)
{
    int n = 0;
    for (int64_t r = 0; r < n_rows && n < max; r++) {
        const float *p = rows + r * (int64_t)no;
        float obj = p[4];
        if (!(obj >= conf)) {
            continue; /* also drops NaN */
        }
        int best = 0;
        for (int k = 1; k < no - 5; k++) {
            best = p[5 + k] > p[5 + best] ? k : best;
        }
        float score = obj * p[5 + best];
        if (!(score >= conf)) {
            continue;
        }
        ki_det *d = &out[n++];
        d->x1 = p[0] - p[2] / 2.0f;
        d->y1 = p[1] - p[3] / 2.0f;
        d->x2 = p[0] + p[2] / 2.0f;
        d->y2 = p[1] + p[3] / 2.0f;
        d->score = score;
        d->cls = best;
        d->index = r;
    }
    return n;
}

int ki_detect_candidates_v8(const float *cols, int64_t n_rows, int no, float conf, ki_det *out,
                            int max)
{
    int n = 0;
    for (int64_t r = 0; r < n_rows && n < max; r++) {
        int best = 0;
        for (int k = 1; k < no - 4; k++) {
            best = cols[(4 + k) * n_rows + r] > cols[(4 + best) * n_rows + r] ? k : best;
        }
        const float score = cols[(4 + best) * n_rows + r];
        if (!(score >= conf)) {
            continue; /* also drops NaN */
        }
        const float cx = cols[r], cy = cols[n_rows + r], w = cols[2 * n_rows + r],
                    h = cols[3 * n_rows + r];
        ki_det *d = &out[n++];
        *d = (ki_det){ cx - w / 2.0f, cy - h / 2.0f, cx + w / 2.0f, cy + h / 2.0f, score, best, r };
    }
    return n;
}

float ki_detect_iou(const ki_det *a, const ki_det *b)
{
    float iw = fminf(a->x2, b->x2) - fmaxf(a->x1, b->x1);
    float ih = fminf(a->y2, b->y2) - fmaxf(a->y1, b->y1);
    float inter = iw > 0 && ih > 0 ? iw * ih : 0.0f;
    float area_a = (a->x2 - a->x1) * (a->y2 - a->y1), area_b = (b->x2 - b->x1) * (b->y2 - b->y1);
    float uni = area_a + area_b - inter;
    return uni > 0 ? inter / uni : 0.0f;
}

static int cmp_det(const void *pa, const void *pb)
{
    const ki_det *a = pa, *b = pb;
    if (a->score != b->score) {
        return a->score > b->score ? -1 : 1;
    }
    return (a->index > b->index) - (a->index < b->index);
}

int ki_detect_nms(ki_det *d, int n, float iou, int max_det)
{
    if (n <= 0 || max_det <= 0) {
        return 0;
    }
    qsort(d, (size_t)n, sizeof *d, cmp_det);
    n = n < KI_DETECT_MAX_NMS ? n : KI_DETECT_MAX_NMS;
    int kept = 0;
    /* invariant: d[0..kept-1] are the survivors so far, best first; d[i] is the next candidate
     * and i >= kept, so moving it down never overwrites an unvisited box */
    for (int i = 0; i < n && kept < max_det; i++) {
        bool drop = false;
        for (int j = 0; j < kept && !drop; j++) {
            drop = d[j].cls == d[i].cls && ki_detect_iou(&d[j], &d[i]) > iou;
        }
        if (!drop) {
            d[kept++] = d[i];
        }
    }
    return kept;
}

static float clampf(float v, float lo, float hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

void ki_detect_unmap(ki_det *d, int n, const ki_detect_map *map)
{
    float w = (float)map->width, h = (float)map->height;
    for (int i = 0; i < n; i++) {
        d[i].x1 = clampf((d[i].x1 - map->px) / map->sx, 0.0f, w);
        d[i].x2 = clampf((d[i].x2 - map->px) / map->sx, 0.0f, w);
        d[i].y1 = clampf((d[i].y1 - map->py) / map->sy, 0.0f, h);
        d[i].y2 = clampf((d[i].y2 - map->py) / map->sy, 0.0f, h);
    }
}

int ki_detect_drop_empty(ki_det *d, int n)
{
    int kept = 0;
    for (int i = 0; i < n; i++) {
        if (d[i].x2 - d[i].x1 > 0.0f && d[i].y2 - d[i].y1 > 0.0f) {
            d[kept++] = d[i];
        }
    }
    return kept;
}

ki_detect_map ki_detect_map_image(const ki_image_prep *p, const ki_image_info *info)
{
    ki_detect_map mp = { 0 };
    mp.width = info->orig_w;
    mp.height = info->orig_h;
    if (info->orig_w <= 0 || info->orig_h <= 0) {
        mp.sx = mp.sy = 1.0f;
        return mp;
    }
    if (p->center_crop) { /* resized, then cropped or padded: x_net = x * scale + offset */
        mp.sx = info->scale;
        mp.sy = info->scale_y;
        mp.px = info->pad_x;
        mp.py = info->pad_y;
    } else if (p->letterbox) {
        /* cli/image.c scales by info->scale, rounds the scaled size and places the picture at
         * the floored offset: undo exactly that */
        mp.sx = (float)lroundf((float)info->orig_w * info->scale) / (float)info->orig_w;
        mp.sy = (float)lroundf((float)info->orig_h * info->scale) / (float)info->orig_h;
        mp.px = floorf(info->pad_x);
        mp.py = floorf(info->pad_y);
    } else {
        mp.sx = (float)p->width / (float)info->orig_w;
        mp.sy = (float)p->height / (float)info->orig_h;
    }
    return mp;
}
