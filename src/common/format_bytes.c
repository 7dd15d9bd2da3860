/* Byte counts in words for messages ("out of memory ... allocating 3.00 GiB"). */
#include <stdio.h>

#include "common/error.h"

const char *ferry_format_bytes(size_t n, char *buf, size_t size)
{
    const double k = 1024.0;
    if (n >= (size_t)1 << 30)
        snprintf(buf, size, "%.2f GiB", (double)n / (k * k * k));
    else if (n >= (size_t)1 << 20)
        snprintf(buf, size, "%.2f MiB", (double)n / (k * k));
    else if (n >= (size_t)1 << 10)
        snprintf(buf, size, "%.2f KiB", (double)n / k);
    else
        snprintf(buf, size, "%zu bytes", n);
    return buf;
}
