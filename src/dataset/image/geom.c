/* Recording and applying a sample's geometry (geom.h): the EXIF turn, then one
 * affine map per axis, then the flip. */
#include "dataset/image/geom.h"

void ferry__geom_start(ferry_image_geom *g, size_t src_w, size_t src_h, int orientation)
{
    int o = orientation >= 2 && orientation <= 8 ? orientation : 1;
    bool swap = o >= 5;
    *g = (ferry_image_geom){
        .src_w = src_w, .src_h = src_h, .orientation = o,
        .w = swap ? src_h : src_w, .h = swap ? src_w : src_h,
        .ax = 1, .bx = 0, .ay = 1, .by = 0,
    };
    g->u1 = (double)g->w;
    g->v1 = (double)g->h;
    g->out_w = g->w;
    g->out_h = g->h;
}

void ferry__geom_box(ferry_image_geom *g, double x0, double y0, double x1, double y1,
                     size_t out_w, size_t out_h)
{
    /* Source x0 goes to 0 and x1 to out_w: PIL's box resample. */
    g->ax = (double)out_w / (x1 - x0);
    g->bx = -x0 * g->ax;
    g->ay = (double)out_h / (y1 - y0);
    g->by = -y0 * g->ay;
    g->out_w = out_w;
    g->out_h = out_h;
    g->hflip = false;
    ferry__geom_canvas(g);
}

void ferry__geom_canvas(ferry_image_geom *g)
{
    /* The output's [0, out_w] back on the oriented image (ax > 0), met with
     * the image: a box past either shows fill, not the box. */
    double u0 = -g->bx / g->ax, u1 = ((double)g->out_w - g->bx) / g->ax;
    double v0 = -g->by / g->ay, v1 = ((double)g->out_h - g->by) / g->ay;
    g->u0 = u0 > 0 ? u0 : 0;
    g->v0 = v0 > 0 ? v0 : 0;
    g->u1 = u1 < (double)g->w ? u1 : (double)g->w;
    g->v1 = v1 < (double)g->h ? v1 : (double)g->h;
}

void ferry__geom_shift(ferry_image_geom *g, ptrdiff_t sy, ptrdiff_t sx)
{
    /* The content moves by (-sy, -sx); after a flip the x part is mirrored. */
    g->by -= (double)sy;
    g->bx += g->hflip ? (double)sx : -(double)sx;
}

void ferry__geom_flip(ferry_image_geom *g)
{
    g->hflip = !g->hflip;
}

/* The stored point (x, y) on the oriented image, as PIL's exif_transpose moves
 * pixels (jpeg_decode.c's orient(), in edge coordinates: a pixel index i that
 * becomes w - 1 - i is the edge x that becomes w - x). */
void ferry__geom_orient(const ferry_image_geom *g, double x, double y, double *u, double *v)
{
    double w = (double)g->src_w, h = (double)g->src_h;
    switch (g->orientation) {
    case 2: *u = w - x; *v = y; break;     /* FLIP_LEFT_RIGHT */
    case 3: *u = w - x; *v = h - y; break; /* ROTATE_180 */
    case 4: *u = x; *v = h - y; break;     /* FLIP_TOP_BOTTOM */
    case 5: *u = y; *v = x; break;         /* TRANSPOSE */
    case 6: *u = h - y; *v = x; break;     /* ROTATE_270 */
    case 7: *u = h - y; *v = w - x; break; /* TRANSVERSE */
    case 8: *u = y; *v = w - x; break;     /* ROTATE_90 */
    default: *u = x; *v = y; break;
    }
}

void ferry__geom_map(const ferry_image_geom *g, double u, double v, double *x, double *y)
{
    double px = g->ax * u + g->bx;
    *x = g->hflip ? (double)g->out_w - px : px;
    *y = g->ay * v + g->by;
}
