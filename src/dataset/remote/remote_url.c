/* What a shard URL means: http(s):// is requested as given; s3://BUCKET/KEY
 * becomes a signed request to the endpoint the AWS_* variables name (as the
 * AWS CLI reads them), so that MinIO, R2 or a local test server work as S3
 * does. No libcurl here: builds without it still tell a URL from a path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/error.h"
#include "dataset/remote/remote.h"

bool ferry__is_url(const char *p)
{
    return p && (!strncasecmp(p, "http://", 7) || !strncasecmp(p, "https://", 8) ||
                 !strncasecmp(p, "s3://", 5));
}

static const char *env(const char *a, const char *b)
{
    const char *v = getenv(a);
    if ((!v || !*v) && b)
        v = getenv(b);
    return v && *v ? v : NULL;
}

static ferry_status too_long(const char *url)
{
    return ferry_fail_at(FERRY_ERR_INVALID_ARG, url, "the URL or its credentials are too long");
}

static ferry_status s3_target(const char *url, ferry_remote_target *t)
{
    const char *bucket = url + 5, *slash = strchr(bucket, '/');
    if (!slash || slash == bucket || !slash[1])
        return ferry_fail_at(FERRY_ERR_INVALID_ARG, url, "not s3://BUCKET/KEY");
    const char *id = env("AWS_ACCESS_KEY_ID", NULL), *secret = env("AWS_SECRET_ACCESS_KEY", NULL);
    if (!id || !secret)
        return ferry_fail_at(FERRY_ERR_INVALID_ARG, url, "s3:// needs AWS_ACCESS_KEY_ID and "
                             "AWS_SECRET_ACCESS_KEY in the environment (and AWS_ENDPOINT_URL for "
                             "a server other than AWS)");
    const char *region = env("AWS_REGION", "AWS_DEFAULT_REGION");
    region = region ? region : "us-east-1";
    const char *ep = env("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL");
    int bn = (int)(slash - bucket), w;
    /* A custom endpoint gets path-style requests (what MinIO and test servers
     * take); AWS itself, virtual-hosted ones. */
    if (ep)
        w = snprintf(t->url, sizeof t->url, "%s%s%.*s%s", ep,
                     ep[strlen(ep) - 1] == '/' ? "" : "/", bn, bucket, slash);
    else
        w = snprintf(t->url, sizeof t->url, "https://%.*s.s3.%s.amazonaws.com%s", bn, bucket,
                     region, slash);
    if (w < 0 || (size_t)w >= sizeof t->url)
        return too_long(url);
    /* The signed request goes to the endpoint only over HTTP: file:// and
     * the rest of libcurl's schemes would read or write local files. */
    if (strncasecmp(t->url, "http://", 7) != 0 && strncasecmp(t->url, "https://", 8) != 0)
        return ferry_fail_at(FERRY_ERR_INVALID_ARG, url, "AWS_ENDPOINT_URL (or AWS_ENDPOINT_URL_S3) "
                             "must start with http:// or https://");
    t->s3 = true;
    const char *token = env("AWS_SESSION_TOKEN", NULL);
    if ((size_t)snprintf(t->sigv4, sizeof t->sigv4, "aws:amz:%s:s3", region) >= sizeof t->sigv4 ||
        (size_t)snprintf(t->userpwd, sizeof t->userpwd, "%s:%s", id, secret) >= sizeof t->userpwd ||
        (token && (size_t)snprintf(t->token, sizeof t->token, "x-amz-security-token: %s", token) >=
                      sizeof t->token))
        return too_long(url);
    return FERRY_OK;
}

ferry_status ferry__remote_target(const char *url, ferry_remote_target *t)
{
    memset(t, 0, sizeof *t);
    if (!strncasecmp(url, "s3://", 5))
        return s3_target(url, t);
    if (strncasecmp(url, "http://", 7) != 0 && strncasecmp(url, "https://", 8) != 0)
        return ferry_fail_at(FERRY_ERR_INVALID_ARG, url, "not an http://, https:// or s3:// URL");
    if ((size_t)snprintf(t->url, sizeof t->url, "%s", url) >= sizeof t->url)
        return too_long(url);
    return FERRY_OK;
}

double ferry__remote_deadline_s(const ferry_remote_opts *o, uint64_t bytes)
{
    double rate = o->min_rate > 0 ? o->min_rate : FERRY_REMOTE_MIN_RATE;
    double t = o->timeout_s > 0 ? o->timeout_s : 10.0;
    return 2 * t + (double)bytes / rate;
}

const char *ferry__redirect_protocols(const char *url)
{
    return strncasecmp(url, "https://", 8) == 0 ? "https" : "http,https";
}

bool ferry__http_transient(long status)
{
    switch (status) {
    case 408: case 425: case 429: case 500: case 502: case 503: case 504:
        return true;
    default:
        return false;
    }
}
