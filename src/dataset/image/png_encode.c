/* PNG encoding through libpng's write API: 8-bit gray, gray+alpha, RGB or RGBA
 * from interleaved pixels. Used by `ferry export` and by tests to make fixtures. */
#include <errno.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "dataset/image/image.h"

typedef struct encoder {
    FILE *f;
    const uint8_t *pixels;
    size_t width, height, channels;
    png_structp png;
    png_infop info;
    char msg[256];
} encoder;

static void on_error(png_structp png, png_const_charp msg)
{
    encoder *e = png_get_error_ptr(png);
    snprintf(e->msg, sizeof e->msg, "%s", msg ? msg : "unknown libpng error");
    png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

static png_voidp on_malloc(png_structp png, png_alloc_size_t n)
{
    (void)png;
    return ferry_host_malloc(n);
}

static void on_free(png_structp png, png_voidp p)
{
    (void)png;
    ferry_host_free(p);
}

static ferry_status write_rows(encoder *e)
{
    if (setjmp(png_jmpbuf(e->png)))
        return FERRY_ERR_IO;
    static const int types[5] = {0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA,
                                 PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGB_ALPHA};
    png_init_io(e->png, e->f);
    png_set_IHDR(e->png, e->info, (png_uint_32)e->width, (png_uint_32)e->height, 8,
                 types[e->channels], PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    /* Level 6 is zlib's default trade-off; small images are dominated by file
     * creation anyway. */
    png_set_compression_level(e->png, 6);
    png_write_info(e->png, e->info);
    size_t stride = e->width * e->channels;
    for (size_t y = 0; y < e->height; y++)
        png_write_row(e->png, e->pixels + y * stride);
    png_write_end(e->png, NULL);
    return FERRY_OK;
}

ferry_status ferry_png_save(const char *path, const void *pixels, size_t width,
                                  size_t height, size_t channels)
{
    if (!path || !pixels)
        return FERRY_ARG_ERROR("NULL argument");
    if (channels < 1 || channels > 4 || width == 0 || height == 0 || width > 0x7fffffff ||
        height > 0x7fffffff)
        return ferry_fail_at(FERRY_ERR_INVALID_ARG, path,
                             "cannot write a %zux%z" "u image with %zu channels", width,
                             height, channels);
    encoder e = {.pixels = pixels, .width = width, .height = height, .channels = channels};
    e.f = fopen(path, "wb");
    if (!e.f)
        return ferry_fail_at(FERRY_ERR_IO, path, "%s", strerror(errno));
    ferry_status st;
    e.png = png_create_write_struct_2(PNG_LIBPNG_VER_STRING, &e, on_error, on_warning, NULL,
                                      on_malloc, on_free);
    if (e.png)
        e.info = png_create_info_struct(e.png);
    if (!e.png || !e.info) {
        st = ferry_fail_at(FERRY_ERR_NO_MEMORY, path, "cannot create the libpng writer");
    } else {
        st = write_rows(&e);
        if (st != FERRY_OK)
            ferry_fail_at(st, path, "%s", e.msg);
    }
    png_destroy_write_struct(e.png ? &e.png : NULL, e.info ? &e.info : NULL);
    if (fclose(e.f) != 0 && st == FERRY_OK)
        st = ferry_fail_at(FERRY_ERR_IO, path, "%s", strerror(errno));
    if (st != FERRY_OK)
        remove(path);
    return st;
}
