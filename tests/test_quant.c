/* Quantization: the NF4 codebook against the published values, the half-step error bound of
 * every scheme and block size, storage and bits per parameter, double quantization, and the
 * effect of an outlier and of block size on the error. */
#include "precision/format.h"
#include "precision/quant.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

/* As printed in QLoRA's bitsandbytes NF4 table (Dettmers et al. 2023), in full double digits. */
static const double published_nf4[16] = {
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
    -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
    0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
    0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0,
};

/* Standard normal samples (Box-Muller on counter-based bits: reproducible). */
static void normal_data(float *x, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        double u1 = (fmt_random_bits(seed, 2 * i) + 1.0) * 0x1p-32;
        double u2 = fmt_random_bits(seed, 2 * i + 1) * 0x1p-32;
        x[i] = (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    }
}

static QuantError roundtrip(QuantConfig cfg, const float *x, float *y, size_t n)
{
    QuantTensor *q = quant_new(cfg, n);
    assert_non_null(q);
    quant_quantize(q, x);
    quant_dequantize(q, y);
    quant_free(q);
    return quant_error(x, y, n);
}

static void test_nf4_codebook(void **state)
{
    (void)state;
    double built[16], worst = 0.0;
    quant_nf4_construct(built);
    const float *table = quant_nf4_codebook();
    for (int i = 0; i < 16; i++) {
        worst = fmax(worst, fabs(built[i] - published_nf4[i]));
        if (!(fabs(built[i] - published_nf4[i]) <= 1e-7))
            fail_msg("nf4 level %d built from the quantiles: expected %.9f, got %.9f", i,
                     published_nf4[i], built[i]);
        if (table[i] != (float)published_nf4[i])
            fail_msg("nf4 codebook[%d]: expected %.9g, got %.9g", i, (double)(float)published_nf4[i],
                     (double)table[i]);
        if (i > 0)
            assert_true(table[i] > table[i - 1]);
    }
    print_message("nf4: levels built from N(0,1) quantiles differ from the published ones by "
                  "at most %.2g\n", worst);
    assert_true(table[7] == 0.0f && table[0] == -1.0f && table[15] == 1.0f);
    for (int i = 0; i < 16; i++)
        assert_int_equal(quant_nf4_nearest(table[i]), i);
    for (int i = 0; i < 15; i++) {
        float mid = 0.5f * (table[i] + table[i + 1]);
        assert_int_equal(quant_nf4_nearest(mid), i);               /* ties go down */
        assert_int_equal(quant_nf4_nearest(nextafterf(mid, 2.0f)), i + 1);
    }
    assert_int_equal(quant_nf4_nearest(-3.0f), 0);
    assert_int_equal(quant_nf4_nearest(3.0f), 15);
}

static void test_int8_known_codes(void **state)
{
    (void)state;
    float x[4] = {-1.0f, 0.5f, 0.25f, 1.0f}, y[4];
    QuantTensor *q = quant_new((QuantConfig){.kind = QUANT_INT8}, 4);
    quant_quantize(q, x);
    assert_true(quant_block_scale(q, 0) == 1.0f / 127.0f);
    assert_int_equal(quant_code_at(q, 0), -127);
    assert_int_equal(quant_code_at(q, 1), 64);          /* 63.5 rounds to even */
    assert_int_equal(quant_code_at(q, 2), 32);          /* 31.75 */
    assert_int_equal(quant_code_at(q, 3), 127);
    quant_dequantize(q, y);
    assert_true(y[0] == -1.0f && y[3] == 1.0f);
    quant_free(q);

    float a[4] = {-1.0f, 0.0f, 2.0f, 3.0f};           /* asymmetric int4: [-1, 3] in 15 steps */
    q = quant_new((QuantConfig){.kind = QUANT_INT4, .asymmetric = true}, 4);
    quant_quantize(q, a);
    assert_true(fabsf(quant_block_scale(q, 0) - 4.0f / 15.0f) < 1e-7f);
    assert_int_equal(quant_block_zero(q, 0), 4);        /* rint(1 / (4/15)) = rint(3.75) */
    assert_int_equal(quant_code_at(q, 0), 0);
    assert_int_equal(quant_code_at(q, 1), 4);
    assert_int_equal(quant_code_at(q, 3), 15);
    quant_free(q);
}

/* Every value within half a step of its block's scale; zero stays exactly zero; codes stay in
 * range. For NF4 the step is the gap between the two levels around the value. */
static void check_half_step(QuantConfig cfg, const float *x, size_t n)
{
    QuantTensor *q = quant_new(cfg, n);
    float *y = malloc(n * sizeof *y);
    quant_quantize(q, x);
    quant_dequantize(q, y);
    const float *levels = quant_nf4_codebook();
    int qmax = cfg.kind == QUANT_INT8 ? 127 : 7;
    for (size_t i = 0; i < n; i++) {
        size_t b = i / q->cfg.block;
        float s = quant_block_scale(q, b);
        int c = quant_code_at(q, i);
        double half = 0.5 * s;
        if (cfg.kind == QUANT_NF4) {
            double gap_lo = c > 0 ? levels[c] - levels[c - 1] : 0.0;
            double gap_hi = c < 15 ? levels[c + 1] - levels[c] : 0.0;
            half = 0.5 * s * fmax(gap_lo, gap_hi);
            assert_true(c >= 0 && c <= 15);
        } else if (cfg.asymmetric) {
            assert_true(c >= 0 && c <= 2 * qmax + 1);
        } else {
            assert_true(c >= -qmax && c <= qmax);
        }
        assert_true(fabs((double)x[i] - y[i]) <= half * (1 + 1e-6) + 1e-12);
        if (x[i] == 0.0f)
            assert_true(y[i] == 0.0f);
    }
    free(y);
    quant_free(q);
}

static void test_half_step_bound(void **state)
{
    (void)state;
    enum { ROWS = 27, COLS = 37, N = ROWS * COLS };     /* odd n: a half-filled last byte */
    float *x = malloc(N * sizeof *x);
    normal_data(x, N, 11);
    for (size_t i = 0; i < N; i += 13)
        x[i] = 0.0f;
    x[100] = 25.0f;                                     /* an outlier */
    size_t blocks[] = {0, COLS, 64, 100};               /* tensor, row, QLoRA's, uneven */
    int checked = 0;
    for (int k = 0; k < QUANT_KIND_COUNT; k++)
        for (int asym = 0; asym < 2; asym++)
            for (size_t b = 0; b < sizeof blocks / sizeof *blocks; b++) {
                if (k == QUANT_NF4 && asym)
                    continue;
                check_half_step((QuantConfig){k, blocks[b], asym, false, 0}, x, N);
                checked++;
            }
    assert_int_equal(checked, 20);
    free(x);
}

static void test_storage_and_bits(void **state)
{
    (void)state;
    QuantConfig nf4_dq = {.kind = QUANT_NF4, .block = 64, .double_quant = true};
    QuantConfig nf4 = {.kind = QUANT_NF4, .block = 64};
    assert_true(quant_bits_per_param(nf4_dq) == 4.0 + 8.0 / 64 + 32.0 / (64 * 256));
    assert_true(fabs(quant_bits_per_param(nf4_dq) - 4.127) < 5e-4);
    assert_true(quant_bits_per_param(nf4) == 4.5);
    assert_true(quant_bits_per_param((QuantConfig){.kind = QUANT_INT8}) == 8.0);
    assert_true(quant_bits_per_param((QuantConfig){QUANT_INT8, 64, true, false, 0}) == 8.625);
    /* 2 double-quant blocks of 256 blocks of 64: 16384 code bytes, 512 scale codes, 2 + 1
     * floats */
    size_t n = 64 * 256 * 2;
    assert_int_equal(quant_bytes(nf4_dq, n), 16384 + 512 + 3 * 4);
    assert_int_equal(quant_bytes(nf4, n), 16384 + 512 * 4);
    assert_int_equal(quant_bytes((QuantConfig){QUANT_INT4, 10, true, false, 0}, 25),
                     13 + 3 + 3 * 4);
    print_message("nf4 64/256 double quant: %.4f bits per parameter in a %zu-value tensor "
                  "(%.6f for a large one)\n", 8.0 * quant_bytes(nf4_dq, n) / n, n,
                  quant_bits_per_param(nf4_dq));

    /* bind carves one buffer: arrays inside it and disjoint */
    size_t bytes = quant_bytes(nf4_dq, 1000);
    float *storage = malloc(bytes);
    QuantTensor q;
    assert_int_equal(quant_bind(&q, nf4_dq, 1000, storage), 0);
    assert_int_equal(q.nblocks, 16);
    assert_int_equal(q.ndq, 1);
    uint8_t *base = (uint8_t *)storage;
    assert_true((uint8_t *)q.scale_mean + sizeof(float) <= q.codes);
    assert_true(q.codes + 500 <= q.scale_codes);
    assert_true(q.scale_codes + 16 == base + bytes);
    assert_null(q.scales);
    assert_null(q.zeros);
    free(storage);

    QuantConfig bad = {.kind = QUANT_NF4, .asymmetric = true};
    assert_int_equal(quant_bytes(bad, 10), 0);
    assert_int_equal(quant_bind(&q, bad, 10, NULL), -1);
    assert_null(quant_new(bad, 10));
    assert_int_equal(quant_kind_from_name("nf4"), QUANT_NF4);
    assert_int_equal(quant_kind_from_name("int2"), -1);
}

/* Double quantization changes each scale by at most half an e4m3 step of its centred value,
 * and costs little accuracy. */
static void test_double_quant(void **state)
{
    (void)state;
    enum { N = 64 * 600 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    normal_data(x, N, 5);
    for (size_t i = 0; i < N; i++)
        x[i] *= 0.02f * (1.0f + (float)(i / 4096));     /* scales that vary along the tensor */
    QuantConfig plain = {.kind = QUANT_NF4, .block = 64};
    QuantConfig dq = {.kind = QUANT_NF4, .block = 64, .double_quant = true};
    QuantTensor *qp = quant_new(plain, N), *qd = quant_new(dq, N);
    quant_quantize(qp, x);
    quant_quantize(qd, x);
    assert_int_equal(qd->ndq, 3);
    float mean = *qd->scale_mean;
    double sum = 0;
    for (size_t b = 0; b < qp->nblocks; b++)
        sum += qp->scales[b];
    assert_true(fabs(mean - sum / qp->nblocks) <= 1e-6 * mean);
    for (size_t b = 0; b < qp->nblocks; b++) {
        double s = qp->scales[b], s_dq = quant_block_scale(qd, b);
        double c = qd->dq_scales[b / 256], centred = fabs(s - mean);
        assert_true(fabs(s_dq - s) <= fmax(centred / 16, c / 1024) * (1 + 1e-5) + 1e-9);
    }
    QuantError e_plain = roundtrip(plain, x, y, N), e_dq = roundtrip(dq, x, y, N);
    print_message("nf4 block 64: SQNR %.2f dB, with double quantization %.2f dB\n",
                  e_plain.sqnr_db, e_dq.sqnr_db);
    assert_true(e_dq.sqnr_db < e_plain.sqnr_db + 0.05);
    assert_true(e_dq.sqnr_db > e_plain.sqnr_db - 1.0);
    quant_free(qp);
    quant_free(qd);
    free(x);
    free(y);
}

/* One outlier ruins a per-tensor int4 scale; small blocks confine the damage. */
static void test_outlier_and_block_size(void **state)
{
    (void)state;
    enum { N = 4096 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    normal_data(x, N, 3);
    QuantError clean = roundtrip((QuantConfig){.kind = QUANT_INT4}, x, y, N);
    x[1234] = 60.0f;
    size_t blocks[] = {0, 1024, 256, 64};
    double sqnr[4];
    for (int b = 0; b < 4; b++) {
        QuantError e = roundtrip((QuantConfig){.kind = QUANT_INT4, .block = blocks[b]}, x, y, N);
        sqnr[b] = e.sqnr_db;
        print_message("int4 block %4zu with an outlier: max abs %.4f, RMS %.4f, SQNR %.2f dB\n",
                      blocks[b] ? blocks[b] : (size_t)N, e.max_abs, e.rms, e.sqnr_db);
    }
    print_message("int4 per tensor without the outlier: SQNR %.2f dB\n", clean.sqnr_db);
    assert_true(clean.sqnr_db > sqnr[0] + 3.0);
    for (int b = 1; b < 4; b++)
        assert_true(sqnr[b] > sqnr[b - 1]);
    free(x);
    free(y);
}

static void test_error_metrics_and_ranges(void **state)
{
    (void)state;
    float x[3] = {1, 2, 3}, y[3] = {1, 2, 4};
    QuantError e = quant_error(x, y, 3);
    assert_true(e.max_abs == 1.0);
    assert_true(fabs(e.rms - sqrt(1.0 / 3)) < 1e-12);
    assert_true(fabs(e.sqnr_db - 10 * log10(14.0)) < 1e-9);
    assert_true(isinf(quant_error(x, x, 3).sqnr_db));

    enum { N = 1000 };
    float a[N], full[N], part[N];
    normal_data(a, N, 9);
    QuantTensor *q = quant_new((QuantConfig){.kind = QUANT_INT4, .block = 64}, N);
    quant_quantize(q, a);
    quant_dequantize(q, full);
    quant_dequantize_range(q, 130, 517, part);
    assert_memory_equal(full + 130, part, 517 * sizeof(float));
    quant_free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nf4_codebook),
        cmocka_unit_test(test_int8_known_codes),
        cmocka_unit_test(test_half_step_bound),
        cmocka_unit_test(test_storage_and_bits),
        cmocka_unit_test(test_double_quant),
        cmocka_unit_test(test_outlier_and_block_size),
        cmocka_unit_test(test_error_metrics_and_ranges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
