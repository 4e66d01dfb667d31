/* memory_calculator --fragmentation: the lecture's "out of memory despite available memory", the
 * script of plan/fragmentation.h played three times (traced on the caching device allocator;
 * the cache emptied between the steps; the plain allocator under a budget) and printed. */
#include "examples/memory_calculator/fragmentation.h"

#include <stdio.h>

#include "plan/fragmentation.h"

static const double MIB = 1024.0 * 1024.0;

static void show(void *ctx, const char *what, const char *name, size_t bytes,
                 const MemDeviceStats *st)
{
    (void)ctx;
    printf("  %-6s %-22s %7.1f MiB   reserved %5.1f  allocated %5.1f  largest free %5.1f\n",
           what, name, bytes / MIB, st->reserved / MIB, st->allocated / MIB,
           st->largest_free / MIB);
}

void fragmentation_demo(void)
{
    printf("Fragmentation: a caching device allocator (autograd/mem.h, mem_device_begin), "
           "capacity %.0f MiB,\nsegments of at least %.0f MiB, best-fit blocks, freed blocks "
           "cached, no compaction (MiB):\n", FRAG_CAPACITY / MIB, FRAG_SEGMENT / MIB);
    FragResult s;
    FragWatch watch = { .event = show };
    frag_run_device(false, &watch, &s);
    if (s.failed) {
        const MemDeviceStats *st = &s.end;
        printf("\n  FAILED %s: %s\n", s.failed_name, s.error);
        printf("  capacity %.1f, reserved %.1f in %d segments, allocated %.1f, largest free "
               "block %.1f:\n  free on the device %.1f MiB (reserved but free %.1f, never "
               "reserved %.1f) >= the %.1f MiB asked for\n", st->capacity / MIB,
               st->reserved / MIB, st->segments, st->allocated / MIB, st->largest_free / MIB,
               (st->capacity - st->allocated) / MIB, (st->reserved - st->allocated) / MIB,
               (st->capacity - st->reserved) / MIB, s.failed_bytes / MIB);
        printf("  after mem_device_empty_cache (%.1f MiB of wholly free segments released): "
               "%s, reserved %.1f, allocated %.1f\n", s.released_after / MIB,
               s.retry_served ? "served" : "fails again", s.after_retry.reserved / MIB,
               s.after_retry.allocated / MIB);
    } else {
        printf("  no allocation failed\n");
    }

    FragResult e;
    frag_run_device(true, NULL, &e);
    printf("\n  the cache emptied between the steps (%.1f MiB released): %s%s, reserved %.1f, "
           "allocated %.1f, largest free %.1f\n", e.released_between / MIB,
           e.failed ? "fails at " : "both steps served", e.failed ? e.failed_name : "",
           e.end.reserved / MIB, e.end.allocated / MIB, e.end.largest_free / MIB);

    FragResult p;
    frag_run_plain(&p);
    printf("\n  plain allocator, budget %.0f MiB on the bytes in use: %s, peak in use %.1f MiB\n",
           FRAG_CAPACITY / MIB, p.failed ? p.error : "both steps served", p.peak_in_use / MIB);
}
