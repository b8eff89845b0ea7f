/* detect.h - post-processing for YOLO-style detectors: rows of (cx, cy, w, h, objectness,
 * class scores...) in network pixels become boxes on the original image.
 *
 * ki_detect_candidates filters by confidence, ki_detect_nms does class-aware non-maximum
 * suppression, ki_detect_unmap undoes the letterbox, and ki_detect_draw / ki_detect_draw_file
 * paint boxes with labels (5x7 bitmap font) and write the picture (stb_image_write).
 * Arrays belong to the caller; nothing here keeps state. Thread-safe. */
#ifndef KI_DETECT_H
#define KI_DETECT_H

#include <stdint.h>

#include "../core/kinfer.h"
#include "image.h"

#define KI_DETECT_MAX_NMS 30000 /* candidates kept for NMS, by score (YOLOv5's max_nms) */
#define KI_DETECT_MAX_DET 300   /* detections kept per image (YOLOv5's max_det), --max-det */
#define KI_COCO_CLASSES   80

/* The COCO class names (coco_names.c), for 80-class detectors run without --labels. */
extern const char *const ki_coco_names[KI_COCO_CLASSES];

typedef struct ki_det {
    float x1, y1, x2, y2; /* corners, x2 >= x1 and y2 >= y1 */
    float score;          /* objectness x class score */
    int cls;
    int64_t index; /* row in the network output; breaks ties in score (lower first) */
} ki_det;

/* How network pixels relate to the original image: x_net = x_orig * sx + px. */
typedef struct ki_detect_map {
    float sx, sy, px, py;
    int width, height; /* of the original image; boxes are clipped to it */
} ki_detect_map;

/* Appends to out (room for max) every row of rows[n_rows][no] (no >= 6) whose objectness and
 * objectness x best class score both reach conf, as a corner box with that class (the first on
 * ties). Returns how many were written; rows beyond max are dropped. */
int ki_detect_candidates(const float *rows, int64_t n_rows, int no, float conf, ki_det *out,
                         int max);

/* The same for a YOLOv8-style output (no objectness): box r's values are cols[c * n_rows + r]
 * for c < no (no >= 5): cx, cy, w, h, then the class scores; a box is kept when its best class
 * score reaches conf, and that is its score. */
int ki_detect_candidates_v8(const float *cols, int64_t n_rows, int no, float conf, ki_det *out,
                            int max);

/* Intersection over union; 0 when the union is empty. */
float ki_detect_iou(const ki_det *a, const ki_det *b);

/* Sorts d[0..n-1] by score (descending; ties by index), keeps at most KI_DETECT_MAX_NMS, then
 * greedily drops each box whose IoU with a kept box of the same class exceeds iou. The kept
 * boxes end up first, best first; returns their count (at most max_det). */
int ki_detect_nms(ki_det *d, int n, float iou, int max_det);

/* The map for an image decoded by ki_image_load with prep p (letterboxed or stretched). */
ki_detect_map ki_detect_map_image(const ki_image_prep *p, const ki_image_info *info);

/* Maps boxes from network pixels back to the original image and clips them to it. */
void ki_detect_unmap(ki_det *d, int n, const ki_detect_map *map);
/* Removes the boxes of zero (or negative, or NaN) width or height, keeping the order; returns
 * how many remain. */
int ki_detect_drop_empty(ki_det *d, int n);

/* Line width YOLOv5 uses for an image of this size (at least 2). */
int ki_detect_line_width(int width, int height);

/* The colour of class cls: 3 bytes RGB. */
const unsigned char *ki_detect_color(int cls);

/* Draws boxes and "label score" tags into an 8-bit RGB image (w*h*3 bytes, row-major). names
 * may be NULL; a class without a name is shown by number. */
void ki_detect_draw(unsigned char *rgb, int w, int h, const ki_det *d, int n,
                    const char *const *names, int n_names);

/* Decodes src as RGB, lets paint change its pixels (w*h*3 bytes), then writes dst atomically:
 * PNG, BMP or TGA by dst's extension, JPEG (quality 90) otherwise. */
typedef void (*ki_paint_fn)(unsigned char *rgb, int w, int h, void *ctx);
ki_status ki_image_repaint_file(const char *src, const char *dst, ki_paint_fn paint, void *ctx,
                               ki_error *err);

/* Decodes src, draws the boxes and writes dst atomically: PNG, BMP or TGA by dst's extension,
 * JPEG (quality 90) otherwise. */
ki_status ki_detect_draw_file(const char *src, const char *dst, const ki_det *d, int n,
                              const char *const *names, int n_names, ki_error *err);

#endif
