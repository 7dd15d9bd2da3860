/* Remote shards in a build without libcurl: every URL is refused by name, with
 * what to do about it. (The Makefile compiles this instead of remote_fetch.c.) */
#include "common/error.h"
#include "dataset/remote/remote.h"

static ferry_status no_curl(const char *url)
{
    return ferry_fail_at(FERRY_ERR_UNSUPPORTED, url, "this build of ferry has no libcurl, so it "
                         "cannot read shards by URL (install libcurl4-openssl-dev and rebuild, or "
                         "download the shard and give its path)");
}

ferry_status ferry__remote_stat(const char *url, const ferry_remote_opts *o,
                                ferry_remote_counters *cnt, ferry_remote_obj *out)
{
    (void)o, (void)cnt, (void)out;
    return no_curl(url);
}

ferry_status ferry__remote_get(const char *url, const ferry_remote_opts *o,
                               const ferry_remote_obj *obj, uint64_t from, uint64_t end,
                               ferry_remote_sink sink, ferry_remote_cancelled cancelled, void *arg,
                               ferry_remote_counters *cnt)
{
    (void)o, (void)obj, (void)from, (void)end, (void)sink, (void)cancelled, (void)arg, (void)cnt;
    return no_curl(url);
}

ferry_status ferry__remote_conn_create(ferry_remote_conn **out)
{
    *out = NULL; /* no connection to keep: every request is refused */
    return FERRY_OK;
}

void ferry__remote_conn_destroy(ferry_remote_conn *c) { (void)c; }

ferry_status ferry__remote_conn_get(ferry_remote_conn *c, const char *url,
                                    const ferry_remote_opts *o, const ferry_remote_obj *obj,
                                    uint64_t from, uint64_t end, ferry_remote_sink sink,
                                    ferry_remote_cancelled cancelled, void *arg,
                                    ferry_remote_counters *cnt)
{
    (void)c;
    return ferry__remote_get(url, o, obj, from, end, sink, cancelled, arg, cnt);
}
