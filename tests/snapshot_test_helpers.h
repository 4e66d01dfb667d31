#ifndef TAPEGRAD_SNAPSHOT_TEST_HELPERS_H
#define TAPEGRAD_SNAPSHOT_TEST_HELPERS_H
/* Shared by tests/test_snapshot.c and tests/test_snapshot_corrupt.c: a temporary directory per
 * run, whole-file reads and writes, a small valid snapshot, and the check that an error message
 * reads "PATH: ..." and names the problem. */
#include "tests/test_helpers.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "autograd/snapshot.h"

static char dir[256];   /* a fresh temporary directory per run */

static inline const char *in_dir(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", dir, name);
    return buf;
}

static inline unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(*len + 1);
    assert_int_equal(fread(buf, 1, *len, f), *len);
    fclose(f);
    return buf;
}

static inline void spit(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* The little-endian u64 a snapshot starts with. */
static inline uint64_t header_length(const unsigned char *file)
{
    uint64_t n = 0;
    for (int i = 0; i < 8; i++)
        n |= (uint64_t)file[i] << (8 * i);
    return n;
}

static inline void set_header_length(unsigned char *file, uint64_t n)
{
    for (int i = 0; i < 8; i++)
        file[i] = (unsigned char)(n >> (8 * i));
}

/* The message must read "PATH: ..." and contain needle. */
static inline void expect_message(const char *msg, const char *path, const char *needle)
{
    size_t n = strlen(path);
    if (strncmp(msg, path, n) != 0 || strncmp(msg + n, ": ", 2) != 0 || !strstr(msg, needle)) {
        print_error("expected \"%s: ...%s...\", got \"%s\"\n", path, needle, msg);
        fail();
    }
}

static inline void expect_open_fails(const char *path, const char *needle)
{
    SnapshotError err = { { 0 } };
    SnapshotReader *r = snapshot_open(path, &err);
    if (r) {
        snapshot_close(r);
        print_error("%s opened; expected an error containing \"%s\"\n", path, needle);
        fail();
    }
    expect_message(err.message, path, needle);
}

/* A small valid snapshot at path; its bytes in *bytes (caller frees). */
static inline unsigned char *write_small(const char *path, size_t *len)
{
    static const float values[6] = { 1, 2, 3, 4, 5, 6 };
    SnapshotError err;
    SnapshotWriter *w = snapshot_writer_new();
    snapshot_add(w, "codes", SNAPSHOT_U8, 1, (int64_t[]){ 4 }, "ABCD", NULL);
    snapshot_add(w, "w", SNAPSHOT_F32, 2, (int64_t[]){ 2, 3 }, values, NULL);
    snapshot_add_meta_u64(w, "step", 5, NULL);
    assert_true(snapshot_write(w, path, &err));
    snapshot_writer_free(w);
    return slurp(path, len);
}

/* Copies src to dst with the first occurrence of `from` in the JSON header replaced by `to`
 * (raw JSON text, so it may hold what no writer would write: "\u0000", a value out of range);
 * the header is padded again and its length rewritten, the data kept. */
static inline void edit_header(const char *src, const char *dst, const char *from, const char *to)
{
    size_t len;
    unsigned char *file = slurp(src, &len);
    uint64_t n = header_length(file);
    assert_true(8 + n <= len);
    char *header = malloc(n + 1);
    memcpy(header, file + 8, n);
    header[n] = '\0';
    char *at = strstr(header, from);
    if (!at) {
        print_error("'%s' is not in the header of %s\n", from, src);
        fail();
    }
    size_t head = (size_t)(at - header), tail = n - head - strlen(from);
    size_t body = head + strlen(to) + tail, padded = (body + 7) & ~(size_t)7;
    size_t out_len = 8 + padded + (len - 8 - n);
    unsigned char *out = malloc(out_len);
    set_header_length(out, padded);
    memcpy(out + 8, header, head);
    memcpy(out + 8 + head, to, strlen(to));
    memcpy(out + 8 + head + strlen(to), at + strlen(from), tail);
    memset(out + 8 + body, ' ', padded - body);
    memcpy(out + 8 + padded, file + 8 + n, len - 8 - n);
    spit(dst, out, out_len);
    free(out);
    free(header);
    free(file);
}

/* Copies src to dst with metadata `key` set to the raw JSON text `value` (quotes included:
 * "\"1.5\"", "\"add\\u0000x\""). */
static inline void edit_meta(const char *src, const char *dst, const char *key, const char *value)
{
    SnapshotError err;
    SnapshotReader *r = snapshot_open(src, &err);
    assert_non_null(r);
    const char *old = snapshot_meta(r, key);
    if (!old) {
        print_error("%s has no metadata '%s'\n", src, key);
        fail();
    }
    size_t size = strlen(key) + strlen(old) + strlen(value) + 16;
    char *from = malloc(size), *to = malloc(size);
    snprintf(from, size, "\"%s\":\"%s\"", key, old);
    snprintf(to, size, "\"%s\":%s", key, value);
    snapshot_close(r);
    edit_header(src, dst, from, to);
    free(from);
    free(to);
}

/* Removes path and everything under it (the test directory). */
static inline void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char child[1024];
            if (snprintf(child, sizeof child, "%s/%s", path, e->d_name) < (int)sizeof child)
                remove_tree(child);
        }
        closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

static inline int make_dir(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/tapegrad_snapshot_XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static inline int remove_dir(void **state)
{
    (void)state;
    remove_tree(dir);
    return 0;
}

#endif
