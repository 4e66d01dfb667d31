/* data/tinyshakespeare.txt is the file data/README.md describes: its size, its SHA-256 against
 * the .sha256 file beside it, and what train_gpt's text loader makes of it (vocabulary 65, the
 * fixed 90/10 split). The SHA-256 is computed here (FIPS 180-4), checked first on the
 * standard's own test vectors, so a corrupted copy fails the suite instead of quietly moving
 * every loss measured on it. */
#include "tests/test_helpers.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/text.h"

#define CORPUS TAPEGRAD_SOURCE_DIR "/data/tinyshakespeare.txt"
enum { CORPUS_BYTES = 1115394 };

/* ---- SHA-256 ------------------------------------------------------------------------------ */

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2,
};

static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

/* One 64-byte block into the state h[8]. */
static void sha256_block(uint32_t h[8], const unsigned char *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) +
                      K[i] + w[i];
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d;
    h[4] += e; h[5] += f; h[6] += g; h[7] += k;
}

/* The digest of data[0..n-1] as 64 lowercase hex digits in hex[65]. */
static void sha256_hex(const unsigned char *data, size_t n, char hex[65])
{
    uint32_t h[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                      0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };
    size_t full = n / 64 * 64;
    for (size_t i = 0; i < full; i += 64)
        sha256_block(h, data + i);
    /* the tail, a 1 bit, zeros, and the length in bits: one or two more blocks */
    unsigned char last[128] = { 0 };
    size_t rest = n - full, blocks = rest + 9 <= 64 ? 1 : 2;
    memcpy(last, data + full, rest);
    last[rest] = 0x80;
    uint64_t bits = (uint64_t)n * 8;
    for (int i = 0; i < 8; i++)
        last[blocks * 64 - 1 - i] = (unsigned char)(bits >> (8 * i));
    for (size_t b = 0; b < blocks; b++)
        sha256_block(h, last + 64 * b);
    for (int i = 0; i < 8; i++)
        snprintf(hex + 8 * i, 9, "%08x", h[i]);
}

static void test_sha256_vectors(void **state)
{
    (void)state;
    char hex[65];
    sha256_hex((const unsigned char *)"", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha256_hex((const unsigned char *)"abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    /* 56 bytes: the padding spills into a second block */
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha256_hex((const unsigned char *)two, strlen(two), hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

/* ---- the corpus --------------------------------------------------------------------------- */

static unsigned char *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    size_t cap = 1 << 21, len = 0, got;
    unsigned char *buf = malloc(cap);
    assert_non_null(buf);
    while ((got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
    }
    fclose(f);
    *n = len;
    return buf;
}

static void test_corpus_checksum(void **state)
{
    (void)state;
    size_t n;
    unsigned char *text = read_all(CORPUS, &n);
    assert_int_equal(n, CORPUS_BYTES);
    char hex[65], want[65] = { 0 };
    sha256_hex(text, n, hex);
    FILE *f = fopen(CORPUS ".sha256", "r");
    if (!f)
        fail_msg("cannot open %s.sha256", CORPUS);
    /* sha256sum's format: the digest, two spaces, the file name */
    char name[64] = { 0 };
    assert_int_equal(fscanf(f, "%64s %63s", want, name), 2);
    fclose(f);
    assert_string_equal(name, "tinyshakespeare.txt");
    assert_string_equal(hex, want);
    free(text);
}

/* What train_gpt's loader makes of it: the numbers data/README.md states. */
static void test_corpus_split(void **state)
{
    (void)state;
    char err[256];
    TextData *d = text_open(CORPUS, 64, err, sizeof err);
    if (!d)
        fail_msg("%s", err);
    assert_int_equal(text_vocab_size(d), 65);
    assert_int_equal(text_train_len(d), 1003855);
    assert_int_equal(text_val_len(d), 111539);
    assert_int_equal(text_val_count(d), 1742);
    assert_int_equal(text_char(d, 0), '\n');      /* the smallest byte present */
    assert_int_equal(text_char(d, 64), 'z');
    /* the validation part starts where the training part ends: its first window */
    int tokens[64], targets[64];
    assert_int_equal(text_val_batch(d, 0, 1, tokens, targets), 1);
    size_t n;
    unsigned char *text = read_all(CORPUS, &n);
    for (int t = 0; t < 64; t++) {
        assert_int_equal(text_char(d, tokens[t]), text[1003855 + t]);
        assert_int_equal(text_char(d, targets[t]), text[1003855 + t + 1]);
    }
    free(text);
    text_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_vectors),
        cmocka_unit_test(test_corpus_checksum),
        cmocka_unit_test(test_corpus_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
