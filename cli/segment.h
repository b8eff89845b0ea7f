/* segment.h - semantic segmentation outputs (N, classes, H, W): the per-pixel argmax, the share
 * of each class, a palette PNG of the class map and an overlay of it on the image. Arrays belong
 * to the caller; no state. Thread-safe. */
#ifndef KI_SEGMENT_H
#define KI_SEGMENT_H

#include <stdint.h>

#include "../core/kinfer.h"
#include "detect.h"

#define KI_SEGMENT_MAX_CLASSES 255 /* class indices fit a byte; 255 marks "not seen" */
#define KI_SEGMENT_UNSEEN      255

/* map[p] = the class with the largest logit at pixel p (the first on ties; NaN never wins) of
 * one image's c planes of hw values each. */
void ki_segment_argmax(const float *logits, int64_t c, int64_t hw, uint8_t *map);

/* The PASCAL VOC colour of class k (its index's bits spread over R, G and B). */
void ki_segment_color(int k, unsigned char rgb[3]);

/* The class map of the network's w x h pixels brought to the original image's m->width x
 * m->height pixels through m (nearest network pixel); KI_SEGMENT_UNSEEN where the network saw
 * nothing (cropped away, letterbox padding outside). */
void ki_segment_unmap(const uint8_t *map, int w, int h, const ki_detect_map *m, uint8_t *out);

/* Writes a w x h class map as an 8-bit palette PNG (the VOC colours), atomically. */
ki_status ki_segment_write_png(const char *path, const uint8_t *map, int w, int h, ki_error *err);

/* Decodes the image src, blends each pixel half and half with its class's colour in map (the
 * image's size; class 0, the background, and KI_SEGMENT_UNSEEN are left as they are) and writes
 * dst like ki_image_repaint_file. */
ki_status ki_segment_overlay_file(const char *src, const char *dst, const uint8_t *map, int w,
                                  int h, ki_error *err);

#endif
