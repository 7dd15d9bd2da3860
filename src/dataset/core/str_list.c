/* A growing list of owned strings: the names a folder or shard listing finds. */
#include <string.h>

#include "common/error.h"
#include "dataset/core/internal.h"

void ferry__str_list_free(ferry_str_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        ferry_host_free(l->v[i]);
    ferry_host_free(l->v);
    memset(l, 0, sizeof *l);
}

ferry_status ferry__str_list_push(ferry_str_list *l, char *s)
{
    if (!s)
        return FERRY_ERR_NO_MEMORY;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        char **v = ferry_host_realloc(l->v, cap * sizeof *v);
        if (!v) {
            ferry_host_free(s);
            return FERRY_ERR_NO_MEMORY;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = s;
    return FERRY_OK;
}
