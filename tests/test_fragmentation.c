/* The lecture's fragmentation script (plan/fragmentation.h) on the caching device allocator:
 * where it fails and what the device holds then, worked out from the script by hand (MiB):
 * params 2 and grads 2 and step 1's blocks fill six 8 MiB segments (48 reserved), Adam's m and
 * v (2 each) land in step 1's holes; step 2's activations are 6 each, its logits and their
 * gradient 8 each. At step 2's logits' gradient 40 MiB are allocated (2 + 2 + 4 for the states,
 * 4 x 6 of activations and 8 of logits), the largest hole is 2 MiB and a seventh segment would
 * take the reserved bytes to 56 > 54: 14 MiB are free, 8 are asked for. */
#include "tests/test_helpers.h"

#include "plan/fragmentation.h"

static const size_t MIB = 1u << 20;

static int events;

static void count(void *ctx, const char *what, const char *name, size_t bytes,
                  const MemDeviceStats *st)
{
    (void)ctx;
    (void)what;
    (void)name;
    assert_true(bytes % MIB == 0);             /* every block a whole number of MiB */
    assert_true(st->allocated <= st->reserved && st->reserved <= FRAG_CAPACITY);
    events++;
}

static void test_device(void **state)
{
    (void)state;
    size_t before = mem_current(MEM_ALL);
    FragResult r;
    FragWatch watch = { .event = count };
    frag_run_device(false, &watch, &r);
    assert_true(r.failed);
    assert_string_equal(r.failed_name, "step 2 dlogits");
    assert_int_equal(r.failed_bytes, 8 * MIB);
    assert_int_equal(r.end.reserved, 48 * MIB);
    assert_int_equal(r.end.allocated, 40 * MIB);
    assert_int_equal(r.end.largest_free, 2 * MIB);
    assert_int_equal(r.end.capacity - r.end.allocated, 14 * MIB);
    assert_int_equal(r.released_after, 0);     /* every segment pinned by a live block */
    assert_false(r.retry_served);
    assert_true(events > 40);
    assert_int_equal(mem_current(MEM_ALL), before);   /* everything given back */

    FragResult e;
    frag_run_device(true, NULL, &e);
    assert_true(e.failed);
    assert_string_equal(e.failed_name, "step 2 dlogits");
    assert_int_equal(e.released_between, 24 * MIB);
    assert_int_equal(mem_current(MEM_ALL), before);
}

static void test_plain(void **state)
{
    (void)state;
    FragResult p;
    frag_run_plain(&p);
    assert_false(p.failed);
    /* the plain allocator counts the bytes asked for: 48 MiB in ten blocks at the peak (the
     * states' four, four activations, the logits and their gradient), each 64 bytes short */
    assert_int_equal(p.peak_in_use, 48 * MIB - 10 * 64);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device),
        cmocka_unit_test(test_plain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
