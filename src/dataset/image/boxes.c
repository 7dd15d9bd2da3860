/* Boxes through a sample's geometry (boxes.h), as torchvision's transforms.v2
 * moves tv_tensors.BoundingBoxes (XYXY, clamped to the canvas) and then
 * SanitizeBoundingBoxes drops the degenerate ones with their labels; here the
 * threshold is a fraction of the box's area, so a box cut down to a sliver by
 * a crop can go too. */
#include <math.h>
#include <string.h>

#include "dataset/image/boxes.h"

static double clampd(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* The box [x0, x1) x [y0, y1) through g's affine part and flip, as lo/hi. */
static void map_box(const ferry_image_geom *g, double x0, double y0, double x1, double y1,
                    double lo[2], double hi[2])
{
    /* Opposite corners land on opposite corners under scales, shifts and
     * flips: the image of the box is the box of the two images. */
    double px, py, qx, qy;
    ferry__geom_map(g, x0, y0, &px, &py);
    ferry__geom_map(g, x1, y1, &qx, &qy);
    lo[0] = fmin(px, qx);
    hi[0] = fmax(px, qx);
    lo[1] = fmin(py, qy);
    hi[1] = fmax(py, qy);
}

/* Box b through g into out (clipped); false when it is to be dropped. */
static bool move_box(const ferry_image_geom *g, const float *b, double min_frac, float *out)
{
    double x0 = b[0], y0 = b[1], x1 = b[2], y1 = b[3];
    /* !(a < b) also catches NaN. */
    if (!(x0 < x1) || !(y0 < y1) || !isfinite(x0) || !isfinite(y0) || !isfinite(x1) ||
        !isfinite(y1))
        return false;
    double u[2], v[2]; /* the box on the oriented image, the same way round */
    ferry__geom_orient(g, x0, y0, &u[0], &v[0]);
    ferry__geom_orient(g, x1, y1, &u[1], &v[1]);
    double u0 = fmin(u[0], u[1]), u1 = fmax(u[0], u[1]);
    double v0 = fmin(v[0], v[1]), v1 = fmax(v[0], v[1]);
    double lo[2], hi[2];
    map_box(g, u0, v0, u1, v1, lo, hi);
    double area = (hi[0] - lo[0]) * (hi[1] - lo[1]);
    /* Clipped first to the part of the image the output shows (as
     * transforms.v2 clamps to each canvas in turn: a shift's fill is not the
     * box's), then to the output. */
    u0 = clampd(u0, g->u0, g->u1);
    u1 = clampd(u1, g->u0, g->u1);
    v0 = clampd(v0, g->v0, g->v1);
    v1 = clampd(v1, g->v0, g->v1);
    map_box(g, u0, v0, u1, v1, lo, hi);
    double W = (double)g->out_w, H = (double)g->out_h;
    double cx0 = clampd(lo[0], 0, W), cx1 = clampd(hi[0], 0, W);
    double cy0 = clampd(lo[1], 0, H), cy1 = clampd(hi[1], 0, H);
    double kept = (cx1 - cx0) * (cy1 - cy0);
    if (!(area > 0) || !(kept > 0) || kept < min_frac * area)
        return false;
    out[0] = (float)cx0;
    out[1] = (float)cy0;
    out[2] = (float)cx1;
    out[3] = (float)cy1;
    /* A sliver narrower than float's spacing collapses when stored. */
    return out[0] < out[2] && out[1] < out[3];
}

size_t ferry__boxes_apply(const ferry_image_geom *g, float *boxes, size_t k,
                          double min_area_frac, const ferry_box_follower *followers,
                          size_t nfollowers)
{
    double frac = min_area_frac > 0 ? min_area_frac : 0; /* NaN too */
    size_t kept = 0;
    for (size_t i = 0; i < k; i++) {
        float moved[4];
        if (!move_box(g, boxes + 4 * i, frac, moved))
            continue;
        memcpy(boxes + 4 * kept, moved, sizeof moved);
        for (size_t f = 0; f < nfollowers; f++) {
            uint8_t *d = followers[f].data;
            size_t rb = followers[f].row_bytes;
            if (kept != i)
                memmove(d + kept * rb, d + i * rb, rb);
        }
        kept++;
    }
    return kept;
}
