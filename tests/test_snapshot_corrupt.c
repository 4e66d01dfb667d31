/* Snapshots that are not valid: cut at every length, a corrupt header length, malformed JSON,
 * impossible offsets and shapes. Each is refused with a message that names the file and the
 * problem, and none crashes (run under SANITIZE=1 too). */
#include "tests/snapshot_test_helpers.h"

/* A file laid out by hand: the header text as given (padded with spaces to 8 bytes), then data.
 * For headers no JSON library would write. */
static void write_raw(const char *path, const char *header, size_t header_len, const void *data,
                      size_t data_len)
{
    size_t padded = (header_len + 7) & ~(size_t)7;
    unsigned char *buf = calloc(1, 8 + padded + data_len);
    set_header_length(buf, padded);
    memcpy(buf + 8, header, header_len);
    memset(buf + 8 + header_len, ' ', padded - header_len);
    if (data_len)
        memcpy(buf + 8 + padded, data, data_len);
    spit(path, buf, 8 + padded + data_len);
    free(buf);
}

static void test_truncated_at_every_length(void **state)
{
    (void)state;
    char path[512], cut[512];
    in_dir(path, sizeof path, "whole.safetensors");
    in_dir(cut, sizeof cut, "cut.safetensors");
    size_t len;
    unsigned char *whole = write_small(path, &len);
    for (size_t n = 0; n < len; n++) {
        spit(cut, whole, n);
        expect_open_fails(cut, "truncated");
    }
    spit(cut, whole, len);   /* the whole file is fine */
    SnapshotError err;
    SnapshotReader *r = snapshot_open(cut, &err);
    assert_non_null(r);
    snapshot_close(r);
    print_message("%zu truncated lengths of a %zu-byte file refused\n", len, len);
    free(whole);
}

static void test_corrupt_header_length(void **state)
{
    (void)state;
    char path[512], bad[512];
    in_dir(path, sizeof path, "good.safetensors");
    in_dir(bad, sizeof bad, "bad_length.safetensors");
    size_t len;
    unsigned char *file = write_small(path, &len);
    uint64_t n = header_length(file);
    const struct {
        uint64_t    length;
        const char *needle;
    } cases[] = {
        { (uint64_t)1 << 63, "is over the limit of 100000000 bytes" },
        { len, "truncated: the header length is" },
        { 0, "too short for a JSON object" },
        { n - 8, "not valid JSON" },
        { n + 4, "bytes other than padding" },   /* the JSON, then "ABCD" of the first tensor */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        set_header_length(file, cases[i].length);
        spit(bad, file, len);
        expect_open_fails(bad, cases[i].needle);
    }
    free(file);
}

static void test_malformed_headers(void **state)
{
    (void)state;
    static const struct {
        const char *header;
        size_t      data;     /* bytes of data after the header */
        const char *needle;
    } cases[] = {
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]}", 4,
          "not valid JSON" },
        { "[1, 2]", 0, "does not start with '{'" },
        { "{} x", 0, "bytes other than padding" },
        { "{\"\xff\": 1}", 0, "not valid UTF-8" },
        { "{\"\xed\xa0\x80\": 1}", 0, "not valid UTF-8" },   /* a surrogate */
        { "{\"a\": 1}", 0, "tensor 'a' is not a JSON object" },
        { "{\"a\": {\"dtype\": \"F99\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
          "tensor 'a' has unknown dtype F99" },
        { "{\"a\": {\"dtype\": 5, \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
          "unknown dtype (not a string)" },
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": [4, -1], \"data_offsets\": [0, 4]}}", 4,
          "shape holds something other than a size" },
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": [1.5], \"data_offsets\": [0, 4]}}", 4,
          "shape holds something other than a size" },
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": \"4\", \"data_offsets\": [0, 4]}}", 4,
          "shape is not a list" },
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": [1,1,1,1,1,1,1,1,4], \"data_offsets\": [0, 4]}}",
          4, "at most 8 sizes" },
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0]}}", 4,
          "data_offsets is not a pair" },
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [4, 0]}}", 4,
          "data_offsets is not a pair" },
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 1e300]}}", 4,
          "data_offsets is not a pair" },
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 18014398509481984]}}",
          4, "data_offsets is not a pair" },   /* 2^54: past what a double holds exactly */
        { "{\"a\": {\"dtype\": \"U8\", \"data_offsets\": [0, 4]}}", 4, "tensor 'a' has no 'shape'" },
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4], \"foo\": 1}}", 4,
          "tensor 'a' has an unexpected field 'foo'" },
        { "{\"a\": {\"dtype\": \"U8\", \"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]}}",
          4, "tensor 'a' has field 'dtype' twice" },
        { "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 4]}}", 4,
          "tensor 'a' is F32 [2], 8 bytes, but its data_offsets [0, 4] span 4" },
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": [8], \"data_offsets\": [0, 8]}}", 4,
          "tensor 'a' has data_offsets [0, 8] but the data buffer holds 4 bytes" },
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": [8], \"data_offsets\": [0, 8]},"
          " \"b\": {\"dtype\": \"U8\", \"shape\": [8], \"data_offsets\": [4, 12]}}", 12,
          "tensors 'a' and 'b' overlap: data_offsets [0, 8] and [4, 12]" },
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]},"
          " \"b\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [8, 12]}}", 12,
          "gap in the data buffer: bytes [4, 8) before tensor 'b'" },
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]}}", 8,
          "the data buffer holds 8 bytes but the tensors cover only 4" },
        { "{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]},"
          " \"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [4, 8]}}", 8,
          "tensor 'a' appears twice" },
        { "{\"__metadata__\": {\"step\": 5}}", 0, "metadata 'step' is not a string" },
        { "{\"__metadata__\": [\"step\"]}", 0, "__metadata__ is not a JSON object" },
        { "{\"__metadata__\": {\"k\": \"1\", \"k\": \"2\"}}", 0, "metadata 'k' appears twice" },
        { "{\"__metadata__\": {}, \"__metadata__\": {}}", 0, "__metadata__ appears twice" },
    };
    static const char data[16] = "AAAAAAAAAAAAAAAA";
    char path[512];
    in_dir(path, sizeof path, "malformed.safetensors");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_raw(path, cases[i].header, strlen(cases[i].header), data, cases[i].data);
        expect_open_fails(path, cases[i].needle);
    }
    static const char with_nul[] = "{\"a\0\": 1}";
    write_raw(path, with_nul, sizeof with_nul - 1, NULL, 0);
    expect_open_fails(path, "NUL byte");

    /* Controls: the same hand-made layout is accepted when it is right. */
    const char *good = "{\"a\": {\"dtype\": \"U8\", \"shape\": [2, 2], \"data_offsets\": [0, 4]},"
                       " \"z\": {\"dtype\": \"I64\", \"shape\": [0], \"data_offsets\": [4, 4]}}";
    write_raw(path, good, strlen(good), data, 4);
    SnapshotError err;
    SnapshotReader *r = snapshot_open(path, &err);
    assert_non_null(r);
    char back[4];
    assert_true(snapshot_read(r, "a", SNAPSHOT_U8, 2, (int64_t[]){ 2, 2 }, back, &err));
    assert_memory_equal(back, "AAAA", 4);
    assert_int_equal(snapshot_count(r), 2);
    snapshot_close(r);
    write_raw(path, "{}", 2, NULL, 0);
    r = snapshot_open(path, &err);
    assert_non_null(r);
    assert_int_equal(snapshot_count(r), 0);
    assert_int_equal(snapshot_meta_count(r), 0);
    snapshot_close(r);
}

static void test_open_errors(void **state)
{
    (void)state;
    char path[512];
    expect_open_fails(in_dir(path, sizeof path, "does_not_exist.safetensors"),
                      "cannot open: No such file or directory");
    expect_open_fails(dir, "not a regular file");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_truncated_at_every_length),
        cmocka_unit_test(test_corrupt_header_length),
        cmocka_unit_test(test_malformed_headers),
        cmocka_unit_test(test_open_errors),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
