/* The token shards: named as tar shards are (a file, a folder of .bin/.npy,
 * a list file, URLs, brace notation: shards_paths.c), each header checked at
 * open; reads of token ranges by pread, or by one Range request for a URL
 * (only the bytes a sample needs cross the network). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "dataset/shards/shards.h"
#include "dataset/tokens/tokens.h"

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n > t && !strcasecmp(s + n - t, tail);
}

bool ferry__tok_is_token_path(const char *path)
{
    return ends_with(path, ".bin") || ends_with(path, ".npy");
}

static ferry_status pread_all(int fd, const char *name, uint64_t off, size_t n, uint8_t *dst)
{
    while (n) {
        ssize_t r = pread(fd, dst, n, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return ferry_fail_at(FERRY_ERR_IO, name, "at byte %llu: %s", (unsigned long long)off,
                                 strerror(errno));
        if (r == 0)
            return ferry_fail_at(FERRY_ERR_IO, name, "at byte %llu: the file ended (shrunk "
                                 "since it was opened?)", (unsigned long long)off);
        dst += r;
        off += (uint64_t)r;
        n -= (size_t)r;
    }
    return FERRY_OK;
}

static ferry_status read_bytes(ferry_tok_source *s, ferry_tok_shard *sh, uint64_t off, size_t n,
                               uint8_t *dst)
{
    if (sh->fd >= 0)
        return pread_all(sh->fd, sh->path, off, n, dst);
    return ferry__remote_pool_read(&s->pool, sh->path, &s->opts, &sh->obj, off, n, dst,
                                   &s->counters);
}

static ferry_status open_local(ferry_tok_shard *sh, uint64_t *size)
{
    sh->fd = open(sh->path, O_RDONLY | O_CLOEXEC);
    if (sh->fd < 0)
        return ferry_fail_at(FERRY_ERR_IO, sh->path, "%s", strerror(errno));
    struct stat sb;
    if (fstat(sh->fd, &sb) != 0)
        return ferry_fail_at(FERRY_ERR_IO, sh->path, "%s", strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return ferry_fail_at(FERRY_ERR_INVALID_ARG, sh->path, "not a regular file");
    *size = (uint64_t)sb.st_size;
    return FERRY_OK;
}

static ferry_status open_shard(ferry_tok_source *s, ferry_tok_shard *sh,
                               const ferry_tokens_config *cfg)
{
    uint64_t size = 0;
    ferry_status st;
    if (ferry__is_url(sh->path)) {
        st = ferry__remote_stat(sh->path, &s->opts, &s->counters, &sh->obj);
        size = sh->obj.size;
    } else {
        st = open_local(sh, &size);
    }
    if (st != FERRY_OK)
        return st;
    size_t n = size < FERRY_TOK_HEAD_BYTES ? (size_t)size : FERRY_TOK_HEAD_BYTES;
    uint8_t *head = ferry_host_malloc(n ? n : 1);
    if (!head)
        return FERRY_ERR_NO_MEMORY;
    if (cfg->format != FERRY_TOKENS_RAW)
        st = read_bytes(s, sh, 0, n, head);
    if (st == FERRY_OK)
        st = ferry__tok_header_parse(head, n, size, cfg->format, cfg->raw_token_bytes, sh->path,
                                     &sh->h);
    ferry_host_free(head);
    return st;
}

static ferry_status check_widths(const ferry_tok_source *s)
{
    for (size_t k = 1; k < s->n; k++)
        if (s->shards[k].h.token_bytes != s->shards[0].h.token_bytes)
            return ferry_fail_at(FERRY_ERR_FORMAT, s->shards[k].path, "%zu-byte tokens, but %s "
                                 "has %zu-byte ones (one width for all shards)",
                                 s->shards[k].h.token_bytes, s->shards[0].path,
                                 s->shards[0].h.token_bytes);
    return FERRY_OK;
}

ferry_status ferry__tok_source_open(const char *const *paths, size_t n,
                                    const ferry_tokens_config *cfg, ferry_tok_source *out)
{
    static const ferry_path_kind kind = {ferry__tok_is_token_path, "token files (.bin, .npy)"};
    memset(out, 0, sizeof *out);
    out->opts = (ferry_remote_opts){
        .timeout_s = cfg->remote_timeout_s > 0 ? cfg->remote_timeout_s : 10.0,
        .retries = cfg->remote_retries ? (unsigned)cfg->remote_retries : 5,
        .backoff_s = 0.2};
    char **names = NULL;
    size_t m = 0;
    ferry_status st = ferry__paths_of_kind(paths, n, &kind, &names, &m);
    if (st != FERRY_OK)
        return st;
    out->shards = ferry_host_calloc(m ? m : 1, sizeof *out->shards);
    if (!out->shards) {
        for (size_t i = 0; i < m; i++)
            ferry_host_free(names[i]);
        ferry_host_free(names);
        return FERRY_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < m; i++)
        out->shards[i] = (ferry_tok_shard){.path = names[i], .fd = -1};
    out->n = m;
    ferry__remote_pool_init(&out->pool); /* close finishes it */
    ferry_host_free(names);
    for (size_t k = 0; k < m && st == FERRY_OK; k++)
        st = open_shard(out, &out->shards[k], cfg);
    if (st == FERRY_OK && m > UINT32_MAX)
        st = ferry_fail(FERRY_ERR_LIMIT, "%zu token files (at most %u)", m, UINT32_MAX);
    if (st == FERRY_OK)
        st = check_widths(out);
    if (st != FERRY_OK) {
        ferry__tok_source_close(out);
        return st;
    }
    out->token_bytes = m ? out->shards[0].h.token_bytes : 2;
    return FERRY_OK;
}

void ferry__tok_source_close(ferry_tok_source *s)
{
    for (size_t k = 0; s->shards && k < s->n; k++) {
        if (s->shards[k].fd >= 0)
            close(s->shards[k].fd);
        ferry_host_free(s->shards[k].path);
    }
    ferry_host_free(s->shards);
    ferry__remote_pool_fini(&s->pool);
    memset(s, 0, sizeof *s);
}

ferry_status ferry__tok_read(ferry_tok_source *s, size_t k, uint64_t first, size_t count,
                             void *dst)
{
    ferry_tok_shard *sh = &s->shards[k];
    if (first > sh->h.count || count > sh->h.count - first)
        return ferry_fail_at(FERRY_ERR_IO, sh->path, "tokens %llu to %llu are past its %llu",
                             (unsigned long long)first, (unsigned long long)first + count,
                             (unsigned long long)sh->h.count);
    size_t b = s->token_bytes;
    return read_bytes(s, sh, sh->h.data_off + first * b, count * b, dst);
}
