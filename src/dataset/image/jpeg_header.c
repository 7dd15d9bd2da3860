/* A JPEG's header, read from the bytes without libjpeg: the markers up to the
 * first scan give the frame (size, components, coding) and the EXIF orientation of the first APP1 "Exif" segment (the one PIL
 * reads). Cheap enough for listing a data set, and it refuses what libjpeg-turbo
 * cannot decode (lossless, hierarchical, 12-bit) before anything is allocated. */
#include <string.h>

#include "common/error.h"
#include "dataset/image/image.h"

static unsigned be16(const uint8_t *p)
{
    return (unsigned)p[0] << 8 | p[1];
}

static uint32_t tiff32(const uint8_t *p, int le)
{
    return le ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24
              : (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static unsigned tiff16(const uint8_t *p, int le)
{
    return le ? (unsigned)p[0] | (unsigned)p[1] << 8 : be16(p);
}

/* The Orientation tag (0x0112) of IFD0 in a TIFF block; 1 when absent or not
 * 1..8 (PIL's exif_transpose then does nothing either). */
static int exif_orientation(const uint8_t *t, size_t n)
{
    if (n < 8)
        return 1;
    int le = !memcmp(t, "II*\0", 4);
    if (!le && memcmp(t, "MM\0*", 4) != 0)
        return 1;
    uint32_t ifd = tiff32(t + 4, le);
    if (ifd > n - 2)
        return 1;
    size_t count = tiff16(t + ifd, le);
    for (size_t i = 0; i < count && ifd + 2 + 12 * (i + 1) <= n; i++) {
        const uint8_t *e = t + ifd + 2 + 12 * i;
        if (tiff16(e, le) != 0x0112)
            continue;
        unsigned type = tiff16(e + 2, le), v = 0;
        if (type == 3)
            v = tiff16(e + 8, le);   /* SHORT, as the standard says */
        else if (type == 4)
            v = tiff32(e + 8, le);   /* LONG: some writers use it; PIL reads it too */
        return v >= 1 && v <= 8 ? (int)v : 1;
    }
    return 1;
}

static ferry_status frame(const uint8_t *seg, size_t len, unsigned marker, const char *name,
                          ferry_image_info *out)
{
    if (len < 6)
        return ferry_fail_at(FERRY_ERR_FORMAT, name, "frame header (SOF%u) too short",
                             marker - 0xc0);
    unsigned prec = seg[0], h = be16(seg + 1), w = be16(seg + 3), nc = seg[5];
    if (prec != 8)
        return ferry_fail_at(FERRY_ERR_UNSUPPORTED, name, "%u-bit JPEG samples are not supported "
                             "(8-bit only)", prec);
    if (w == 0 || h == 0)
        return ferry_fail_at(FERRY_ERR_FORMAT, name, "invalid JPEG size %ux%u", w, h);
    if (nc != 1 && nc != 3 && nc != 4)
        return ferry_fail_at(FERRY_ERR_FORMAT, name, "JPEG with %u components (1, 3 or 4 expected)",
                             nc);
    if (len != 6 + 3 * (size_t)nc)
        return ferry_fail_at(FERRY_ERR_FORMAT, name, "frame header (SOF%u) has the wrong length",
                             marker - 0xc0);
    out->width = w;
    out->height = h;
    out->channels = nc;
    out->interlaced = marker == 0xc2 || marker == 0xca;
    return FERRY_OK;
}

ferry_status ferry__jpeg_header(const uint8_t *p, size_t n, const char *name, ferry_image_info *out)
{
    if (!name)
        name = "JPEG";
    if (n < 3 || p[0] != 0xff || p[1] != 0xd8 || p[2] != 0xff)
        return ferry_fail_at(FERRY_ERR_FORMAT, name, "not a JPEG file (%s)",
                             n == 0 ? "empty" : n < 3 ? "too short" : "no start-of-image marker");
    memset(out, 0, sizeof *out);
    out->kind = FERRY_IMAGE_JPEG;
    out->bit_depth = 8;
    out->orientation = 1;
    bool have_frame = false, have_exif = false;
    size_t pos = 2;
    while (pos < n) {
        /* As libjpeg's next_marker: bytes other than 0xFF before a marker are
         * skipped (it warns), 0xFF fill bytes too. */
        while (pos < n && p[pos] != 0xff)
            pos++;
        while (pos < n && p[pos] == 0xff)
            pos++;
        if (pos >= n)
            break;
        unsigned m = p[pos++];
        if (m == 0xd8 || m == 0x01 || (m >= 0xd0 && m <= 0xd7) || m == 0x00)
            continue; /* no length; 0x00 is a stuffed byte libjpeg would skip */
        if (m == 0xd9)
            return ferry_fail_at(FERRY_ERR_FORMAT, name, "JPEG ends (EOI) before any scan");
        if (n - pos < 2 || be16(p + pos) < 2 || be16(p + pos) > n - pos)
            return ferry_fail_at(FERRY_ERR_FORMAT, name, "JPEG truncated in marker 0x%02X at byte %zu",
                                 m, pos - 2);
        const uint8_t *seg = p + pos + 2;
        size_t len = be16(p + pos) - 2;
        pos += 2 + len;
        if (m == 0xda) {
            if (!have_frame)
                return ferry_fail_at(FERRY_ERR_FORMAT, name, "JPEG scan (SOS) before the frame header");
            return FERRY_OK;
        }
        if (m == 0xc0 || m == 0xc1 || m == 0xc2 || m == 0xc9 || m == 0xca) {
            if (have_frame)
                return ferry_fail_at(FERRY_ERR_FORMAT, name, "JPEG has two frame headers");
            ferry_status st = frame(seg, len, m, name, out);
            if (st != FERRY_OK)
                return st;
            have_frame = true;
        } else if ((m >= 0xc3 && m <= 0xcf) && m != 0xc4 && m != 0xc8 && m != 0xcc) {
            return ferry_fail_at(FERRY_ERR_UNSUPPORTED, name, "%s JPEG (SOF%u) is not supported",
                                 (m & 3) == 3 ? "lossless" : "hierarchical", m - 0xc0);
        } else if (m == 0xe1 && !have_exif && len >= 6 && !memcmp(seg, "Exif\0\0", 6)) {
            have_exif = true;
            out->orientation = exif_orientation(seg + 6, len - 6);
        }
    }
    return ferry_fail_at(FERRY_ERR_FORMAT, name, "JPEG truncated before its first scan (%zu bytes)",
                         n);
}

ferry_status ferry_jpeg_info(const void *data, size_t n, ferry_image_info *out)
{
    if ((!data && n) || !out)
        return FERRY_ARG_ERROR("NULL argument");
    return ferry__jpeg_header(data, n, NULL, out);
}
