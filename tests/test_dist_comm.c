/* The communicator (dist/comm.h): shards, the fixed order of the sums, and the bytes counted,
 * against hand-computed values. Runs on 4 ranks (tests/run.sh); sub-tests use 1 to 4. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "autograd/mem.h"
#include "dist/comm.h"
#include "tests/dist_test.h"

static void test_shards_cover_the_vector(void **state)
{
    (void)state;
    /* 10 values over 4 ranks: the first 10 % 4 = 2 shards are one longer. */
    size_t begin[] = { 0, 3, 6, 8, 10 };
    for (int r = 0; r <= 4; r++)
        assert_int_equal(dist_shard_begin(10, 4, r), begin[r]);
    assert_int_equal(dist_shard_count(10, 4, 1), 3);
    assert_int_equal(dist_shard_count(10, 4, 3), 2);
    assert_int_equal(dist_shard_count(3, 4, 3), 0);
}

/* The value rank r contributes at index i: large and small terms whose sum depends on the
 * order in which they are added. */
static float term(int r, size_t i)
{
    static const float scale[] = { 1e8f, 1.0f, -1e8f, 3.0f };
    return scale[r % 4] * (1.0f + (float)(i % 7) * 0.125f) + (float)r * 0.0625f;
}

static void test_allreduce_adds_in_rank_order(void **state)
{
    (void)state;
    bool ok = true;
    for (int n_ranks = 1; n_ranks <= dist_world()->size; n_ranks++) {
        DistComm *c = dist_test_comm(n_ranks);
        if (!c)
            continue;
        enum { N = 37 };
        float x[N], want[N];
        for (size_t i = 0; i < N; i++) {
            x[i] = term(c->rank, i);
            want[i] = term(0, i);
            for (int r = 1; r < n_ranks; r++)
                want[i] += term(r, i);
        }
        dist_allreduce_sum(c, x, N);
        for (size_t i = 0; i < N; i++)
            if (memcmp(&x[i], &want[i], sizeof x[i]) != 0) {
                printf("rank %d of %d: element %zu of the all-reduce: expected %.9g (the sum in "
                       "rank order), got %.9g\n", c->rank, n_ranks, i, (double)want[i],
                       (double)x[i]);
                ok = false;
                break;
            }
        dist_comm_free(c);
    }
    assert_true(dist_test_all(ok));
}

/* Two non-blocking all-reduces in flight at once, started in opposite orders on even and odd
 * ranks and moved on by dist_iallreduce_test alone: the same bits as the rank-ordered sum, the
 * blocking call's bytes, and the scratch returned. One of them has fewer values than ranks (a
 * rank with an empty shard). */
static void test_iallreduce_in_any_order(void **state)
{
    (void)state;
    bool ok = true;
    for (int n_ranks = 1; n_ranks <= dist_world()->size; n_ranks++) {
        DistComm *c = dist_test_comm(n_ranks);
        if (!c)
            continue;
        enum { NA = 37, NB = 3 };
        float a[NA], b[NB], want_a[NA], want_b[NB];
        for (size_t i = 0; i < NA; i++) {
            a[i] = term(c->rank, i);
            want_a[i] = term(0, i);
            for (int r = 1; r < n_ranks; r++)
                want_a[i] += term(r, i);
        }
        for (size_t i = 0; i < NB; i++) {
            b[i] = term(c->rank, i + 5);
            want_b[i] = term(0, i + 5);
            for (int r = 1; r < n_ranks; r++)
                want_b[i] += term(r, i + 5);
        }
        size_t temp_before = mem_current(MEM_TEMP);
        dist_reset_counts(c);
        DistAllreduce ha, hb;
        if (c->rank % 2 == 0) {
            dist_iallreduce_start(c, &ha, a, NA, 0);
            dist_iallreduce_start(c, &hb, b, NB, 1);
        } else {
            dist_iallreduce_start(c, &hb, b, NB, 1);
            dist_iallreduce_start(c, &ha, a, NA, 0);
        }
        bool da = false, db = false;
        while (!da || !db) {
            db = db || dist_iallreduce_test(&hb);
            da = da || dist_iallreduce_test(&ha);
        }
        size_t ca = dist_shard_count(NA, n_ranks, c->rank);
        size_t cb = dist_shard_count(NB, n_ranks, c->rank);
        uint64_t want_bytes = ((NA - ca) + (uint64_t)(n_ranks - 1) * ca +
                               (NB - cb) + (uint64_t)(n_ranks - 1) * cb) * sizeof(float);
        ok = ok && memcmp(a, want_a, sizeof a) == 0 && memcmp(b, want_b, sizeof b) == 0 &&
             c->bytes_sent == want_bytes && c->bytes_recv == want_bytes &&
             mem_current(MEM_TEMP) == temp_before;
        dist_comm_free(c);
    }
    assert_true(dist_test_all(ok));
}

static void test_allreduce_traffic_is_the_textbook_volume(void **state)
{
    (void)state;
    DistComm *w = dist_world();
    enum { N = 1000 };
    float *x = calloc(N, sizeof *x);
    dist_reset_counts(w);
    dist_allreduce_sum(w, x, N);
    /* reduce-scatter sends every value but the own shard (m of them) and receives the own shard
     * from each other rank; all-gather the reverse: (n - m) + (P - 1) m each way, which is
     * 2 n (P - 1) / P when P divides n (4 ranks: 1500 values). */
    uint64_t m = dist_shard_count(N, w->size, w->rank);
    uint64_t want = (N - m + (uint64_t)(w->size - 1) * m) * sizeof(float);
    bool ok = w->bytes_sent == want && w->bytes_recv == want;
    if (w->size == 4)
        ok = ok && want == 1500 * sizeof(float);
    free(x);
    assert_true(dist_test_all(ok));
}

static void test_reduce_scatter_and_allgather_with_uneven_shards(void **state)
{
    (void)state;
    DistComm *w = dist_world();
    enum { N = 11 };
    float in[N], shard[N], want[N];
    for (size_t i = 0; i < N; i++) {
        in[i] = (float)(w->rank + 1) * (float)(i + 1);
        want[i] = 0;
        for (int r = 0; r < w->size; r++)
            want[i] += (float)(r + 1) * (float)(i + 1);
    }
    size_t b = dist_shard_begin(N, w->size, w->rank), n = dist_shard_count(N, w->size, w->rank);
    dist_reduce_scatter_sum(w, in, shard, N);
    bool ok = memcmp(shard, want + b, n * sizeof *shard) == 0;
    /* all-gather 2-byte values: each rank's shard holds its rank number */
    uint16_t mine[N], all[N];
    for (size_t i = 0; i < n; i++)
        mine[i] = (uint16_t)(100 + w->rank);
    dist_allgather(w, mine, all, N, sizeof *all);
    for (int r = 0; r < w->size; r++)
        for (size_t i = dist_shard_begin(N, w->size, r); i < dist_shard_begin(N, w->size, r + 1); i++)
            ok = ok && all[i] == 100 + r;
    assert_true(dist_test_all(ok));
}

/* Blocks of any sizes, one of them empty (ZeRO's per-unit messages): rank r's block is
 * counts[r] values at the sum of the counts before it; the sums are in rank order (the terms
 * make the order visible), the bytes are the blocks'. */
static void test_blocks_of_any_size(void **state)
{
    (void)state;
    DistComm *w = dist_world();
    size_t counts[8] = { 0 }, total = 0;
    for (int r = 0; r < w->size && r < 8; r++) {
        counts[r] = (size_t)(r == 1 ? 0 : 3 + 2 * r);
        total += counts[r];
    }
    if (w->size > 8)
        skip();
    float in[64], shard[64], want[64];
    for (size_t i = 0; i < total; i++) {
        in[i] = term(w->rank, i);
        want[i] = term(0, i);
        for (int r = 1; r < w->size; r++)
            want[i] += term(r, i);
    }
    size_t b = 0;
    for (int r = 0; r < w->rank; r++)
        b += counts[r];
    uint64_t sent0 = w->bytes_sent;
    dist_reduce_scatter_sum_v(w, in, shard, counts);
    bool ok = memcmp(shard, want + b, counts[w->rank] * sizeof *shard) == 0;
    ok = ok && w->bytes_sent - sent0 == (total - counts[w->rank]) * sizeof(float);
    float all[64];
    sent0 = w->bytes_sent;
    dist_allgather_v(w, shard, all, counts, sizeof *all);
    ok = ok && memcmp(all, want, total * sizeof *all) == 0;
    ok = ok && w->bytes_sent - sent0 == (uint64_t)(w->size - 1) * counts[w->rank] * sizeof(float);
    assert_true(dist_test_all(ok));
}

static void test_small_values_and_broadcast(void **state)
{
    (void)state;
    DistComm *w = dist_world();
    double s = dist_sum_double(w, 0.5 * w->rank), m = dist_max_double(w, -(double)w->rank);
    int v[3] = { w->rank, w->rank, w->rank };
    dist_broadcast(w, v, sizeof v, w->size - 1);
    bool every = dist_all_ok(w, true), one_bad = dist_all_ok(w, w->rank != w->size - 1);
    double want = 0.25 * w->size * (w->size - 1);
    bool ok = s == want && m == 0.0 && v[0] == w->size - 1 && v[2] == w->size - 1 && every
              && (w->size == 1 || !one_bad);
    assert_true(dist_test_all(ok));
}

static void test_scratch_is_returned(void **state)
{
    (void)state;
    size_t before = mem_current(MEM_TEMP);
    float x[8] = { 0 };
    dist_allreduce_sum(dist_world(), x, 8);
    assert_true(dist_test_all(mem_current(MEM_TEMP) == before));
}

int main(int argc, char **argv)
{
    dist_test_init(&argc, &argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shards_cover_the_vector),
        cmocka_unit_test(test_allreduce_adds_in_rank_order),
        cmocka_unit_test(test_iallreduce_in_any_order),
        cmocka_unit_test(test_allreduce_traffic_is_the_textbook_volume),
        cmocka_unit_test(test_reduce_scatter_and_allgather_with_uneven_shards),
        cmocka_unit_test(test_blocks_of_any_size),
        cmocka_unit_test(test_small_values_and_broadcast),
        cmocka_unit_test(test_scratch_is_returned),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    dist_finalize();
    return failed;
}
