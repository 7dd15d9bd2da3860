/* Folder reads with an error told from the end, and a failure hook
 * (common/dir.h). */
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>

#include "common/countdown.h"
#include "common/dir.h"

static atomic_llong fail_countdown; /* 0 = off; 1 = fail the next read */

int64_t ferry_debug_fail_dir_read_after(int64_t k) { return atomic_exchange(&fail_countdown, (long long)k); }

struct dirent *ferry_dir_next(DIR *d, int *err)
{
    if (ferry_countdown_fires(&fail_countdown)) {
        *err = EIO;
        return NULL;
    }
    errno = 0;
    struct dirent *e = readdir(d);
    *err = e ? 0 : errno;
    return e;
}
