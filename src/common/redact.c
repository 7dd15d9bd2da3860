/* Credentials removed from printed text (redact.h). A URL's authority runs
 * from "://" to the first '/', '?', '#' or white space; an '@' inside it ends
 * the userinfo, which is what goes. Anything that is not such a URL is copied
 * as it is. */
#include <string.h>

#include "common/redact.h"

/* The userinfo's length when s (just past "://") starts one, else 0. */
static size_t userinfo_len(const char *s)
{
    size_t at = 0;
    for (size_t i = 0; s[i] && !strchr("/?# \t\r\n\"'<>", s[i]); i++)
        if (s[i] == '@')
            at = i + 1; /* the last '@' of the authority ends the userinfo */
    return at ? at - 1 : 0;
}

size_t ferry_redact_urls(const char *in, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; in[i];) {
        size_t u = 0;
        if (in[i] == ':' && in[i + 1] == '/' && in[i + 2] == '/')
            u = userinfo_len(in + i + 3); /* 0: none, or empty ("://@host"): no secret */
        if (!u) {
            if (o + 1 < cap)
                out[o] = in[i];
            o++;
            i++;
            continue;
        }
        for (const char *p = "://***"; *p; p++, o++)
            if (o + 1 < cap)
                out[o] = *p;
        i += 3 + u; /* at the '@' */
    }
    if (cap)
        out[o < cap ? o : cap - 1] = '\0';
    return o;
}
