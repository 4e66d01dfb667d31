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

static void test_format_bytes(void **state)
{
    (void)state;
    char buf[32];
    assert_string_equal(mem_format_bytes(512, buf, sizeof buf), "512 B");
    assert_string_equal(mem_format_bytes(1536, buf, sizeof buf), "1.5 KiB");
    assert_string_equal(mem_format_bytes(3u << 20, buf, sizeof buf), "3.0 MiB");
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_and_peaks),
        cmocka_unit_test(test_alignment_and_calloc),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_format_bytes),
        cmocka_unit_test(test_cache_serves_repeated_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
