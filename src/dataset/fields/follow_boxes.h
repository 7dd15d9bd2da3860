/* A sample's boxes fields moved through its image's geometry (follow_boxes.c). */
#ifndef FERRY_DATASET_FIELDS_FOLLOW_BOXES_H
#define FERRY_DATASET_FIELDS_FOLLOW_BOXES_H

#include "ferry/fields.h"
#include "dataset/image/geom.h"

/* The field with role FERRY_FIELD_BOXES_XYXY among f[0..n) (none: nothing to
 * do) and every FERRY_FIELD_FOLLOWS_BOXES one, decoded into dst[k] with
 * lengths[k] rows, moved through g (ferry__boxes_apply with min_area_frac):
 * the kept rows first, zeros after, lengths set to the kept count. A
 * following field with another row count than the boxes is FERRY_ERR_FORMAT
 * naming both. */
ferry_status ferry__fields_follow_boxes(const ferry_field *f, size_t n, void *const *dst,
                                        size_t *lengths, const ferry_image_geom *g,
                                        double min_area_frac);

#endif
