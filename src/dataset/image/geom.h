/* The geometry an image transform applied to one sample: where every point of
 * the stored image went in the output. The transforms record it as they move
 * the pixels (crop.c, transform.c, image_decode.c), and boxes.c moves boxes
 * through it. Nothing here is public API.
 *
 * Coordinates are pixel edges: pixel i covers [i, i + 1), so a w-pixel row
 * spans [0, w] and a box [x0, x1) covers the pixels whose centres lie in it.
 * In these coordinates PIL's resample (output pixel i's centre is the source
 * point x0 + (i + 0.5) * scale), a crop, a shift and a flip are each exactly
 * affine, so the composition is one affine map per axis after the EXIF turn. */
#ifndef FERRY_DATASET_IMAGE_GEOM_H
#define FERRY_DATASET_IMAGE_GEOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ferry_image_geom {
    size_t src_w, src_h; /* the stored image, before its EXIF orientation */
    int orientation;     /* EXIF 1..8 applied first (1: none), as PIL's exif_transpose */
    size_t w, h;         /* the image after the orientation */
    /* Oriented (u, v) to output: x = ax * u + bx, y = ay * v + by. */
    double ax, bx, ay, by;
    /* The part of the oriented image the output shows ([u0, u1) x [v0, v1):
     * the crop box, or the whole image); outside it the output is fill (a
     * shift's zeros, a centred placement's border). */
    double u0, v0, u1, v1;
    size_t out_w, out_h; /* the output the result is clipped to */
    bool hflip;          /* then x -> out_w - x (the flip comes last) */
} ferry_image_geom;

/* The identity on a stored src_w x src_h image turned by orientation (values
 * outside 2..8 mean none): output = the oriented image. */
void ferry__geom_start(ferry_image_geom *g, size_t src_w, size_t src_h, int orientation);
/* The oriented box [x0, x1) x [y0, y1) resampled onto an out_w x out_h output
 * (RandomResizedCrop, Resize + CenterCrop, a plain resize). Replaces the affine
 * part: it is the first resample after the orientation. */
void ferry__geom_box(ferry_image_geom *g, double x0, double y0, double x1, double y1,
                     size_t out_w, size_t out_h);
/* A crop to the output as it now stands (a centred placement that crops): the
 * shown part of the image shrinks to what lands on [0, out_w] x [0, out_h].
 * Call it before any shift or flip. */
void ferry__geom_canvas(ferry_image_geom *g);
/* The output moved: out(y, x) = in(y + sy, x + sx) (the padded random crop). */
void ferry__geom_shift(ferry_image_geom *g, ptrdiff_t sy, ptrdiff_t sx);
/* A horizontal flip of the output. */
void ferry__geom_flip(ferry_image_geom *g);
/* The stored image's point (x, y) on the oriented image. */
void ferry__geom_orient(const ferry_image_geom *g, double x, double y, double *u, double *v);
/* Where the oriented image's point (u, v) lands in the output. */
void ferry__geom_map(const ferry_image_geom *g, double u, double v, double *x, double *y);

/* Where a centred placement puts an image of n pixels in an output of `out`
 * (the resize mode FERRY_RESIZE_CENTER_CROP): output = source + offset, the
 * offset truncated toward zero. The pixel code and the geometry both use it. */
static inline ptrdiff_t ferry__center_offset(size_t out, size_t n)
{
    return ((ptrdiff_t)out - (ptrdiff_t)n) / 2;
}

#endif
