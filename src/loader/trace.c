/* FERRY_TRACE=path: a Chrome trace (JSON array of complete events) of every
 * sample's decode, every batch's copy and every next() call, for
 * chrome://tracing or Perfetto. Written through stdio under a lock. */
#include <stdlib.h>

#include "common/error.h"
#include "loader/internal.h"

void ferry_trace_open(ferry_loader *l)
{
    const char *path = getenv("FERRY_TRACE");
    if (!path || !*path)
        return;
    l->trace = fopen(path, "w");
    if (!l->trace) {
        ferry_log(FERRY_LOG_WARN, "FERRY_TRACE: cannot write %s; tracing is off", path);
        return;
    }
    fputs("[\n", l->trace);
    l->trace_first = true;
}

void ferry_trace_close(ferry_loader *l)
{
    if (!l->trace)
        return;
    fputs("\n]\n", l->trace);
    fclose(l->trace);
    l->trace = NULL;
}

void ferry_trace_event(ferry_loader *l, const char *name, size_t tid, double start, double end,
                       const char *arg_name, size_t arg)
{
    if (!l->trace)
        return;
    ferry_mutex_lock(&l->trace_lock);
    fprintf(l->trace,
            "%s{\"name\":\"%s\",\"ph\":\"X\",\"pid\":1,\"tid\":%zu,\"ts\":%.3f,\"dur\":%.3f,"
            "\"args\":{\"%s\":%zu}}",
            l->trace_first ? "" : ",\n", name, tid, (start - l->t0) * 1e6, (end - start) * 1e6,
            arg_name, arg);
    l->trace_first = false;
    ferry_mutex_unlock(&l->trace_lock);
}
