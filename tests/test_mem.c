/* The accounting allocator: exact byte counts per category, peaks, budgets, alignment. */
#include "tests/test_helpers.h"

#include <string.h>

#include "autograd/mem.h"

static void test_counts_and_peaks(void **state)
{
    (void)state;
    size_t act0 = mem_current(MEM_ACT), all0 = mem_current(MEM_ALL);
    mem_reset_peaks();
    void *a = mem_alloc(MEM_ACT, 1000);
    void *b = mem_alloc(MEM_ACT, 24);
    void *g = mem_alloc(MEM_GRAD, 4096);
    assert_int_equal(mem_current(MEM_ACT) - act0, 1024);
    assert_int_equal(mem_current(MEM_ALL) - all0, 1024 + 4096);
    assert_int_equal(mem_size(a), 1000);
    assert_int_equal(mem_category(g), MEM_GRAD);
    mem_free(a);
    assert_int_equal(mem_current(MEM_ACT) - act0, 24);
    /* The peak remembers the high-water mark until reset. */
    assert_int_equal(mem_peak(MEM_ACT) - act0, 1024);
    mem_reset_peaks();
    assert_int_equal(mem_peak(MEM_ACT) - act0, 24);
    mem_free(b);
    mem_free(g);
    assert_int_equal(mem_current(MEM_ACT), act0);
    assert_int_equal(mem_current(MEM_ALL), all0);
}

static void test_alignment_and_calloc(void **state)
{
    (void)state;
    for (size_t n = 1; n < 300; n += 37) {
        unsigned char *p = mem_calloc(MEM_TEMP, n);
        assert_int_equal((uintptr_t)p % 64, 0);
        for (size_t i = 0; i < n; i++)
            assert_int_equal(p[i], 0);
        mem_free(p);
    }
}

static void test_budget(void **state)
{
    (void)state;
    size_t base = mem_current(MEM_ACT);
    mem_set_budget(MEM_ACT, base + 1000);
    void *a = mem_try_alloc(MEM_ACT, 800);
    assert_non_null(a);
    void *b = mem_try_alloc(MEM_ACT, 300);
    assert_null(b);
    /* The message names the category, the request, the use and the budget. */
    const char *msg = mem_last_error();
    printf("budget message: %s\n", msg);
    assert_non_null(strstr(msg, "act"));
    assert_non_null(strstr(msg, "300 B"));
    assert_non_null(strstr(msg, "budget"));
    /* Other categories are not limited by the act budget. */
    void *c = mem_try_alloc(MEM_TEMP, 300);
    assert_non_null(c);
    mem_free(c);
    /* A total budget limits the sum. */
    mem_set_budget(MEM_ACT, 0);
    mem_set_budget(MEM_ALL, mem_current(MEM_ALL) + 100);
    assert_null(mem_try_alloc(MEM_PARAM, 101));
    assert_non_null(strstr(mem_last_error(), "total"));
    void *d = mem_try_alloc(MEM_PARAM, 100);
    assert_non_null(d);
    mem_set_budget(MEM_ALL, 0);
    mem_free(d);
    mem_free(a);
    assert_int_equal(mem_current(MEM_ACT), base);
}

/* The boundary is exact: a budget of N bytes in use admits an allocation that reaches N and
 * refuses one that would reach N + 1, and the refusal names the category and the exact bytes. */
static void test_budget_boundary(void **state)
{
    (void)state;
    size_t base = mem_current(MEM_ALL);
    const size_t N = 1000003;      /* odd on purpose: no rounding to a block size hides here */
    mem_set_budget(MEM_ALL, base + N);
    void *over = mem_try_alloc(MEM_OPTIM, N + 1);
    assert_null(over);
    const char *msg = mem_last_error();
    printf("boundary message: %s\n", msg);
    assert_non_null(strstr(msg, "optim allocation"));
    assert_non_null(strstr(msg, "(1000004 bytes)"));
    char want[96], limit[32];
    snprintf(want, sizeof want, "budget %s (%zu bytes)",
             mem_format_bytes(base + N, limit, sizeof limit), base + N);
    assert_non_null(strstr(msg, want));
    assert_int_equal(mem_current(MEM_ALL), base);      /* a refusal counts nothing */
    void *fits = mem_try_alloc(MEM_OPTIM, N);
    assert_non_null(fits);
    assert_int_equal(mem_current(MEM_ALL), base + N);
    /* Full: not one more byte, in any category. */
    assert_null(mem_try_alloc(MEM_TEMP, 1));
    assert_non_null(strstr(mem_last_error(), "temp allocation of 1 B (1 bytes)"));
    mem_free(fits);
    void *again = mem_try_alloc(MEM_TEMP, N);      /* freeing gives the room back */
    assert_non_null(again);
    mem_free(again);
    mem_set_budget(MEM_ALL, 0);
}

static void test_format_bytes(void **state)
{
    (void)state;
    char buf[32];
    assert_string_equal(mem_format_bytes(512, buf, sizeof buf), "512 B");
    assert_string_equal(mem_format_bytes(1536, buf, sizeof buf), "1.5 KiB");
    assert_string_equal(mem_format_bytes(3u << 20, buf, sizeof buf), "3.0 MiB");
    assert_true(mem_mib(3u << 20) == 3.0);          /* 2^20 bytes, not 10^6 */
    assert_true(mem_mib(1536.0 * 1024.0) == 1.5);
}

/* A loop that frees and reallocates the same sizes is served from the cache after its first
 * round: no system allocation, yet the categories count only bytes in use. */
static void test_cache_serves_repeated_sizes(void **state)
{
    (void)state;
#if defined(__SANITIZE_ADDRESS__)
    skip();   /* the cache is off under AddressSanitizer */
#endif
    size_t act0 = mem_current(MEM_ACT);
    size_t sys_after_first = 0;
    for (int round = 0; round < 3; round++) {
        void *a = mem_alloc(MEM_ACT, 100000), *b = mem_alloc(MEM_ACT, 3000);
        assert_int_equal(mem_current(MEM_ACT) - act0, 103000);
        mem_free(b);
        mem_free(a);
        assert_int_equal(mem_current(MEM_ACT), act0);
        if (round == 0)
            sys_after_first = mem_stats().system_allocations;
        else
            assert_int_equal(mem_stats().system_allocations, sys_after_first);
    }
    assert_true(mem_stats().cached_bytes >= 103000);
    mem_release_cache();
    assert_int_equal(mem_stats().cached_bytes, 0);
}

/* The caching device allocator on a scripted sequence, by hand. A request of n KiB - 64 bytes
 * takes a block of exactly n KiB (64-byte header, storage, 512-byte granule); the device holds
 * 6144 KiB, segments are at least 2048 KiB. In KiB (S1, S2 the segments, [from, to) offsets):
 *   a 1024   new S1 2048: a [0, 1024)             reserved 2048 allocated 1024 largest free 1024
 *   b 512    best fit S1 [1024, 1536)                               allocated 1536 largest  512
 *   c 512    S1 [1536, 2048), S1 full                               allocated 2048 largest    0
 *   d 1536   new S2 2048: d [0, 1536)             reserved 4096 allocated 3584 largest  512
 *   free a, c: holes of 1024 and 512 in S1 around b                 allocated 2048 largest 1024
 *   e 3072   no free block holds it; a new segment of 3072 would reserve 7168 > 6144: fails,
 *            though the device has 6144 - 2048 = 4096 free; empty_cache releases nothing
 *   free b   S1 merges into one free 2048 block         allocated 1536 largest 2048; e still
 *            fails (4096 + 3072 > 6144) with 4608 free
 *   empty_cache releases S1 (2048): reserved 2048; e gets a new S2' of 3072:
 *                                                 reserved 5120 allocated 4608 largest  512 */
static void expect_device(size_t reserved, size_t allocated, size_t largest, int segments)
{
    MemDeviceStats st = mem_device_stats();
    assert_int_equal(st.reserved, reserved * 1024);
    assert_int_equal(st.allocated, allocated * 1024);
    assert_int_equal(st.largest_free, largest * 1024);
    assert_int_equal(st.segments, segments);
}

static void *kib(size_t n) { return mem_try_alloc(MEM_ACT, n * 1024 - 64); }

static void test_device_fragmentation(void **state)
{
    (void)state;
    size_t act0 = mem_current(MEM_ACT);
    assert_true(mem_device_begin(6144 * 1024, 2048 * 1024));
    assert_false(mem_device_begin(6144 * 1024, 2048 * 1024));
    void *a = kib(1024);
    expect_device(2048, 1024, 1024, 1);
    void *b = kib(512);
    expect_device(2048, 1536, 512, 1);
    void *c = kib(512);
    expect_device(2048, 2048, 0, 1);
    void *d = kib(1536);
    expect_device(4096, 3584, 512, 2);
    assert_true(a && b && c && d);
    /* best fit put b, c right after a in S1 */
    assert_ptr_equal((char *)b, (char *)a + 1024 * 1024);
    assert_ptr_equal((char *)c, (char *)b + 512 * 1024);
    mem_free(a);
    mem_free(c);
    expect_device(4096, 2048, 1024, 2);
    assert_int_equal(mem_current(MEM_ACT) - act0, (512 + 1536) * 1024 - 128);

    assert_null(kib(3072));
    assert_non_null(strstr(mem_last_error(), "out of memory on the device: act allocation"));
    assert_non_null(strstr(mem_last_error(), "(3145664 bytes)"));
    assert_int_equal(mem_current(MEM_ACT) - act0, (512 + 1536) * 1024 - 128);
    assert_int_equal(mem_device_empty_cache(), 0);
    expect_device(4096, 2048, 1024, 2);
    assert_false(mem_device_end());   /* blocks in use */

    mem_free(b);
    expect_device(4096, 1536, 2048, 2);
    assert_null(kib(3072));
    assert_int_equal(mem_device_empty_cache(), 2048 * 1024);
    expect_device(2048, 1536, 512, 1);
    void *e = kib(3072);
    assert_non_null(e);
    memset(e, 1, 3072 * 1024 - 64);
    expect_device(5120, 4608, 512, 2);
    mem_free(e);
    mem_free(d);
    expect_device(5120, 0, 3072, 2);
    assert_int_equal(mem_current(MEM_ACT), act0);
    assert_true(mem_device_end());
    /* The plain allocator again: 3 MiB is no trouble. */
    void *plain = kib(3072);
    assert_non_null(plain);
    mem_free(plain);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_and_peaks),
        cmocka_unit_test(test_alignment_and_calloc),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_budget_boundary),
        cmocka_unit_test(test_format_bytes),
        cmocka_unit_test(test_cache_serves_repeated_sizes),
        cmocka_unit_test(test_device_fragmentation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
