/* ferry_image_decode_boxes: one image sample as the image datasets make it
 * (decode, crop, augmentation from the sample's stream), its boxes moved
 * through the geometry the pixels went through (geom.h, boxes.h). */
#include <string.h>

#include "common/error.h"
#include "dataset/image/image.h"
#include "dataset/image/boxes.h"

#define MAX_FOLLOW 32 /* per-box fields: as many as a sample has fields */

static ferry_status check_boxes(const ferry_boxes *b)
{
    if (!b)
        return FERRY_OK;
    if (b->count && !b->xyxy)
        return FERRY_ARG_ERROR("boxes: %zu boxes and xyxy NULL", b->count);
    if (b->num_follow && (!b->follow || !b->follow_row_bytes))
        return FERRY_ARG_ERROR("boxes: %zu follow fields and follow or follow_row_bytes NULL",
                               b->num_follow);
    if (b->num_follow > MAX_FOLLOW)
        return FERRY_ARG_ERROR("boxes: %zu follow fields, at most %d", b->num_follow, MAX_FOLLOW);
    for (size_t i = 0; i < b->num_follow; i++)
        if (!b->follow_row_bytes[i] || (b->count && !b->follow[i]))
            return FERRY_ARG_ERROR("boxes: follow field %zu has %s", i,
                                   b->follow_row_bytes[i] ? "no data" : "rows of 0 bytes");
    return FERRY_OK;
}

ferry_status ferry_image_decode_boxes(const void *data, size_t n, const ferry_image_config *cfg,
                                      ferry_scratch *scratch, const ferry_sample_ctx *ctx,
                                      size_t index, const char *name, void *dst,
                                      size_t dst_bytes, ferry_boxes *boxes)
{
    if ((!data && n) || !dst)
        return FERRY_ARG_ERROR("NULL data or dst");
    ferry_status st = check_boxes(boxes);
    ferry_image_config c;
    ferry_sample_format fmt;
    if (st != FERRY_OK ||
        (st = ferry__image_plan(-1, data, n, cfg, name, dst_bytes, &c, &fmt)) != FERRY_OK)
        return st;
    ferry_scratch *own = NULL;
    if (!scratch && (st = ferry_scratch_create(&own)) != FERRY_OK)
        return st;
    ferry_image_geom g;
    st = ferry__image_sample_bytes(&c, &fmt, scratch ? scratch : own, data, n, index, name, dst,
                                   ctx, &g);
    if (st == FERRY_OK && boxes && boxes->count) {
        ferry_box_follower f[MAX_FOLLOW];
        for (size_t i = 0; i < boxes->num_follow; i++)
            f[i] = (ferry_box_follower){boxes->follow[i], boxes->follow_row_bytes[i]};
        boxes->count = ferry__boxes_apply(&g, boxes->xyxy, boxes->count, c.box_min_area_frac, f,
                                          boxes->num_follow);
    }
    ferry_scratch_destroy(own);
    return st;
}
