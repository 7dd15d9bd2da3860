/* Control characters in messages: names come from others (a tar member, a
 * file name, a URL), and "ESC[2K\r" in one would erase the terminal line the
 * error is printed on. Every message and log line shows them as \xHH. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "common/error.h"

/* No byte below 0x20, and no 0x7f, anywhere in s. */
static bool has_control(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s == 0x7f)
            return true;
    return false;
}

TEST(control_characters_are_escaped)
{
    ferry_set_error(FERRY_ERR_IO, "a\x1b[2K\rb\tc\nd\x7f" "e");
    ASSERT_STR_EQ(ferry_last_error(), "a\\x1b[2K\\x0db\\x09c\\x0ad\\x7f" "e");
    /* UTF-8 is not a control character: it stays. */
    ferry_set_error(FERRY_ERR_IO, "caf\xc3\xa9.png");
    ASSERT_STR_EQ(ferry_last_error(), "caf\xc3\xa9.png");
    /* Escaping an escaped text changes nothing (the same message passed on). */
    ferry_set_error(FERRY_ERR_IO, "x\x1b y");
    char again[FERRY_ERROR_MAX];
    snprintf(again, sizeof again, "%s", ferry_last_error());
    ferry_set_error(FERRY_ERR_IO, "%s", again);
    ASSERT_STR_EQ(ferry_last_error(), "x\\x1b y");
}

TEST(escaped_message_is_cut_with_dots)
{
    /* 1000 ESC bytes are 4000 escaped: cut to FERRY_ERROR_MAX, ending in "...",
     * never inside an escape. */
    char raw[1001];
    memset(raw, 0x1b, 1000);
    raw[1000] = '\0';
    ferry_set_error(FERRY_ERR_IO, "%s", raw);
    const char *m = ferry_last_error();
    size_t n = strlen(m);
    ASSERT(n < FERRY_ERROR_MAX);
    ASSERT(n > FERRY_ERROR_MAX - 8);
    ASSERT(!has_control(m));
    ASSERT_STR_EQ(m + n - 3, "...");
    ASSERT_EQ_SIZE((n - 3) % 4, 0);
    for (size_t i = 0; i + 3 < n; i += 4)
        ASSERT_MSG(!memcmp(m + i, "\\x1b", 4), "escape %zu: \"%.4s\"", i / 4, m + i);

    /* A UTF-8 character is not split by the cut. */
    char mixed[FERRY_ERROR_MAX + 64];
    size_t k = 0;
    mixed[k++] = 0x1b;
    while (k + 2 < sizeof mixed - 1) {
        mixed[k++] = (char)0xc3;
        mixed[k++] = (char)0xa9;
    }
    mixed[k] = '\0';
    ferry_set_error(FERRY_ERR_IO, "%s", mixed);
    m = ferry_last_error();
    n = strlen(m);
    ASSERT_STR_EQ(m + n - 3, "...");
    ASSERT(!memcmp(m, "\\x1b", 4));
    ASSERT_EQ_SIZE((n - 3 - 4) % 2, 0); /* whole two-byte characters before the dots */
}

TEST(escaped_subject_named_once)
{
    const char *name = "q\x1b[2K\rx.png";
    ferry_fail_at(FERRY_ERR_FORMAT, name, "bad %s", "IDAT");
    ASSERT_STR_EQ(ferry_last_error(), "q\\x1b[2K\\x0dx.png: bad IDAT");
    /* The subject is the name as given; the reason comes without it. */
    ASSERT_STR_EQ(ferry_error_subject(), name);
    ASSERT_STR_EQ(ferry_error_reason(name), "bad IDAT");
    ferry_fail_named(FERRY_ERR_FORMAT, name); /* already the subject: unchanged */
    ASSERT_STR_EQ(ferry_last_error(), "q\\x1b[2K\\x0dx.png: bad IDAT");
    ferry_fail_prefix(FERRY_ERR_FORMAT, "chunk\r%d: ", 2);
    ASSERT_STR_EQ(ferry_last_error(), "q\\x1b[2K\\x0dx.png: chunk\\x0d2: bad IDAT");
}

static char logged[FERRY_ERROR_MAX];

static void keep_log(ferry_log_level level, const char *msg, void *user)
{
    (void)level;
    (void)user;
    snprintf(logged, sizeof logged, "%s", msg);
}

TEST(log_lines_are_escaped)
{
    ferry_set_log(keep_log, NULL);
    ferry_log(FERRY_LOG_WARN, "skipped %s", "a\x1b[2K\rb");
    ferry_set_log(NULL, NULL);
    ASSERT_STR_EQ(logged, "skipped a\\x1b[2K\\x0db");
}

/* A shard whose member name carries ESC [2K CR: a sample that fails to decode
 * is named with the escapes, in the dataset's message and the loader's. */
TEST(tar_member_name_escaped_in_errors)
{
    const uint8_t px[4] = {1, 2, 3, 4};
    ASSERT_OK(ferry_png_save(ft_tmp("good.png"), px, 2, 2, 1));
    size_t n = 0;
    void *png = ft_read_file(ft_tmp("good.png"), &n);
    ft_tar t = {0};
    ft_tar_file(&t, "a.png", png, n); /* the first sets the format */
    ft_tar_text(&t, "a.cls", "0");
    /* Its header is whole (the shard opens), its data cut (the decode fails). */
    ft_tar_file(&t, "\x1b[2K\rcat.png", png, 40);
    free(png);
    ft_tar_text(&t, "\x1b[2K\rcat.cls", "0");
    ft_tar_end(&t);
    const char *path = ft_tar_save(&t, "esc.tar");
    ferry_dataset *ds = NULL;
    ASSERT_OK(ferry_dataset_shards(&path, 1, NULL, &ds));
    ASSERT_EQ_SIZE(ferry_dataset_len(ds), 2);
    uint8_t buf[64];
    /* Whichever place the shard's order gives it. */
    ferry_status st = ferry_dataset_get(ds, 0, buf, sizeof buf, NULL, NULL);
    if (st == FERRY_OK)
        st = ferry_dataset_get(ds, 1, buf, sizeof buf, NULL, NULL);
    ASSERT(st != FERRY_OK);
    const char *m = ferry_last_error();
    ASSERT_STR_CONTAINS(m, "esc.tar:\\x1b[2K\\x0dcat.png: ");
    ASSERT_MSG(!has_control(m), "a control character in \"%s\"", m);

    ferry_loader_config c = {.dataset = ds, .batch_size = 2, .device = ferry_cpu(),
                             .num_workers = FERRY_LOADER_NO_WORKERS};
    ferry_loader *l = NULL;
    ferry_status cst = ferry_loader_create(&c, &l);
    if (cst == FERRY_OK) {
        ferry_batch b;
        ASSERT(ferry_loader_next(l, NULL, &b) != FERRY_OK);
        ferry_loader_destroy(l);
    }
    m = ferry_last_error();
    ASSERT_STR_CONTAINS(m, "\\x1b[2K\\x0dcat.png");
    ASSERT_MSG(!has_control(m), "a control character in \"%s\"", m);
    ferry_dataset_release(ds);
}
