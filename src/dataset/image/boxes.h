/* Boxes that follow the image (boxes.c): xyxy boxes moved through the geometry
 * a sample's transforms recorded (geom.h), clipped to the output and
 * sanitised, with the per-box fields that travel with them compacted in the
 * same order. Nothing here is public API. */
#ifndef FERRY_DATASET_IMAGE_BOXES_H
#define FERRY_DATASET_IMAGE_BOXES_H

#include <stddef.h>

#include "dataset/image/geom.h"

/* A field that travels with the boxes: one row of row_bytes per box (labels,
 * scores, any element size), moved when a box before it is dropped. */
typedef struct ferry_box_follower {
    void *data;
    size_t row_bytes;
} ferry_box_follower;

/* Moves k boxes (4 floats each, x0 y0 x1 y1 in the stored image's pixels, edge
 * convention: [x0, x1) x [y0, y1)) through g, clips them to the output
 * [0, out_w] x [0, out_h], and keeps a box only when its clipped area is
 * greater than zero and at least min_area_frac of its area before clipping
 * (0: any box with area left; values above 1 keep nothing). A box that is not
 * finite or not x0 < x1, y0 < y1 before the move is dropped too. Kept boxes
 * and their followers' rows move to the front, in order; returns how many. */
size_t ferry__boxes_apply(const ferry_image_geom *g, float *boxes, size_t k,
                          double min_area_frac, const ferry_box_follower *followers,
                          size_t nfollowers);

#endif
