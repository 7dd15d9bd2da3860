/* Boxes that follow the image, for a dataset that decodes a sample's fields
 * itself (shards read as fields): after its IMAGE field went through the
 * sample path with its geometry recorded, the BOXES_XYXY field and every
 * FOLLOWS_BOXES field move with it (dataset/image/boxes.h). */
#include <string.h>

#include "common/error.h"
#include "dataset/core/internal.h"
#include "dataset/fields/follow_boxes.h"
#include "dataset/image/boxes.h"

ferry_status ferry__fields_follow_boxes(const ferry_field *f, size_t n, void *const *dst,
                                        size_t *lengths, const ferry_image_geom *g,
                                        double min_area_frac)
{
    size_t bi = n, nf = 0;
    ferry_box_follower fol[FERRY_FIELD_MAX];
    for (size_t k = 0; k < n && k < FERRY_FIELD_MAX; k++) {
        if (f[k].role == FERRY_FIELD_BOXES_XYXY)
            bi = k;
        else if (f[k].role == FERRY_FIELD_FOLLOWS_BOXES)
            fol[nf++] = (ferry_box_follower){dst[k], ferry_field_row_bytes(&f[k])};
    }
    if (bi == n)
        return FERRY_OK; /* no boxes */
    size_t count = lengths[bi];
    for (size_t k = 0; k < n; k++)
        if (f[k].role == FERRY_FIELD_FOLLOWS_BOXES && lengths[k] != count)
            return ferry_fail(FERRY_ERR_FORMAT,
                              "field '%s' has %zu rows, the boxes ('%s') %zu: a field that "
                              "follows the boxes has one row per box", f[k].name, lengths[k],
                              f[bi].name, count);
    size_t kept = ferry__boxes_apply(g, dst[bi], count, min_area_frac, fol, nf);
    /* Rows past the new count are zero, as a ragged field's padding is. */
    size_t br = ferry_field_row_bytes(&f[bi]);
    memset((uint8_t *)dst[bi] + kept * br, 0, (count - kept) * br);
    lengths[bi] = kept;
    for (size_t k = 0, j = 0; k < n; k++)
        if (f[k].role == FERRY_FIELD_FOLLOWS_BOXES) {
            memset((uint8_t *)dst[k] + kept * fol[j].row_bytes, 0,
                   (count - kept) * fol[j].row_bytes);
            lengths[k] = kept;
            j++;
        }
    return FERRY_OK;
}
