/* memory_calculator --fragmentation: the lecture's "out of memory despite available memory, as
 * contiguous blocks are required", shown with autograd/mem's caching device allocator
 * (mem_device_begin, a model of PyTorch's).
 *
 * A scripted sequence modelled on two training steps of a 4-block model on a device of 54 MiB
 * with segments of at least 8 MiB: the parameters and gradients first; a forward pass keeping
 * one activation per block, each op taking a scratch buffer it frees when it returns; the head's
 * logits; a backward pass (the logits' gradient, then one activation gradient per block while
 * the activations are released); the optimizer's state allocated at the first update (as
 * PyTorch's Adam does it, lazily). The second step runs sequences twice as long: every
 * activation doubles. Its logits' gradient finds no free block and no room for a segment,
 * though the device has more free bytes than it asks for. Emptying the cache then, or between
 * the steps, does not help: the free bytes are the tails of segments that live blocks pin (a
 * 6 MiB activation in an 8 MiB segment, the optimizer's state in step 1's segments). The plain
 * allocator, under the same capacity as a budget on the bytes in use, serves both steps. */
#include "examples/memory_calculator/fragmentation.h"

#include <stdio.h>
#include <string.h>

#include "autograd/mem.h"

enum { LAYERS = 4, SLOTS = 16 };
static const double MIB = 1024.0 * 1024.0;
static const size_t CAPACITY = 54u << 20, SEGMENT = 8u << 20;

typedef struct {
    void *slot[SLOTS];
    bool  device, trace, empty_between;
    bool  failed;                /* a request failed: the script stops allocating */
    char  failed_name[40];
    size_t failed_bytes;
    MemCategory failed_cat;
    size_t released;             /* by an empty_cache between the steps */
} Script;

static void show(const Script *s, const char *what, const char *name, size_t bytes)
{
    if (!s->trace)
        return;
    MemDeviceStats st = mem_device_stats();
    printf("  %-6s %-22s %7.1f MiB   reserved %5.1f  allocated %5.1f  largest free %5.1f\n",
           what, name, bytes / MIB, st.reserved / MIB, st.allocated / MIB,
           st.largest_free / MIB);
}

/* A request of `mib` MiB, less the 64-byte header, so a device block is exactly that size. */
static bool take(Script *s, int slot, const char *name, MemCategory cat, double mib)
{
    if (s->failed)
        return false;
    size_t bytes = (size_t)(mib * MIB) - 64;
    s->slot[slot] = mem_try_alloc(cat, bytes);
    if (!s->slot[slot]) {
        s->failed = true;
        snprintf(s->failed_name, sizeof s->failed_name, "%s", name);
        s->failed_bytes = bytes;
        s->failed_cat = cat;
        return false;
    }
    if (s->device)
        show(s, "alloc", name, bytes + 64);
    return true;
}

static void drop(Script *s, int slot, const char *name)
{
    if (!s->slot[slot] || s->failed)
        return;
    size_t bytes = mem_size(s->slot[slot]) + 64;
    mem_free(s->slot[slot]);
    s->slot[slot] = NULL;
    if (s->device)
        show(s, "free", name, bytes);
}

/* Slots: 0 params, 1 grads, 2 and 3 Adam's m and v, 4.. 4+LAYERS-1 the blocks' activations,
 * 8 scratch, 9 logits, 10 their gradient, 11 and 12 the activation gradients. */
static void step(Script *s, int k, double scale)
{
    char name[40];
    for (int l = 0; l < LAYERS && !s->failed; l++) {
        snprintf(name, sizeof name, "step %d block %d act", k, l);
        take(s, 4 + l, name, MEM_ACT, 3.0 * scale);
        snprintf(name, sizeof name, "step %d block %d scratch", k, l);
        if (take(s, 8, name, MEM_TEMP, 1.0 * scale))
            drop(s, 8, name);
    }
    snprintf(name, sizeof name, "step %d logits", k);
    take(s, 9, name, MEM_ACT, 4.0 * scale);
    snprintf(name, sizeof name, "step %d dlogits", k);
    take(s, 10, name, MEM_TEMP, 4.0 * scale);
    drop(s, 9, "logits");
    for (int l = LAYERS - 1; l >= 0 && !s->failed; l--) {
        int g = 11 + (l % 2);
        snprintf(name, sizeof name, "step %d block %d dx", k, l);
        take(s, g, name, MEM_TEMP, 3.0 * scale);
        drop(s, l == LAYERS - 1 ? 10 : 11 + ((l + 1) % 2), "gradient above");
        drop(s, 4 + l, "its act");
    }
    drop(s, 11, "dx_0");
    drop(s, 12, "dx_0");
    if (k == 1) {
        take(s, 2, "adam m", MEM_OPTIM, 2.0);
        take(s, 3, "adam v", MEM_OPTIM, 2.0);
    }
}

static void release(Script *s)
{
    s->failed = false;
    for (int i = 0; i < SLOTS; i++)
        drop(s, i, "the rest");
}

static void run(Script *s)
{
    take(s, 0, "params", MEM_PARAM, 2.0);
    take(s, 1, "grads", MEM_GRAD, 2.0);
    step(s, 1, 1.0);
    if (s->empty_between)
        s->released = mem_device_empty_cache();
    step(s, 2, 2.0);
}

void fragmentation_demo(void)
{
    printf("Fragmentation: a caching device allocator (autograd/mem.h, mem_device_begin), "
           "capacity %.0f MiB,\nsegments of at least %.0f MiB, best-fit blocks, freed blocks "
           "cached, no compaction (MiB):\n", CAPACITY / MIB, SEGMENT / MIB);
    Script s = { .device = true, .trace = true };
    mem_device_begin(CAPACITY, SEGMENT);
    run(&s);
    if (s.failed) {
        MemDeviceStats st = mem_device_stats();
        printf("\n  FAILED %s: %s\n", s.failed_name, mem_last_error());
        printf("  capacity %.1f, reserved %.1f in %d segments, allocated %.1f, largest free "
               "block %.1f:\n  free on the device %.1f MiB (reserved but free %.1f, never "
               "reserved %.1f) >= the %.1f MiB asked for\n", st.capacity / MIB,
               st.reserved / MIB, st.segments, st.allocated / MIB, st.largest_free / MIB,
               (st.capacity - st.allocated) / MIB, (st.reserved - st.allocated) / MIB,
               (st.capacity - st.reserved) / MIB, (s.failed_bytes + 64) / MIB);
        size_t released = mem_device_empty_cache();
        void *retry = mem_try_alloc(s.failed_cat, s.failed_bytes);
        st = mem_device_stats();
        printf("  after mem_device_empty_cache (%.1f MiB of wholly free segments released): "
               "%s, reserved %.1f, allocated %.1f\n", released / MIB,
               retry ? "served" : "fails again", st.reserved / MIB, st.allocated / MIB);
        mem_free(retry);
    } else {
        printf("  no allocation failed\n");
    }
    s.trace = false;
    release(&s);
    mem_device_end();

    /* The same, the cache emptied between the steps (torch.cuda.empty_cache() in the loop). */
    Script e = { .device = true, .empty_between = true };
    mem_device_begin(CAPACITY, SEGMENT);
    run(&e);
    MemDeviceStats st = mem_device_stats();
    printf("\n  the cache emptied between the steps (%.1f MiB released): %s%s, reserved %.1f, "
           "allocated %.1f, largest free %.1f\n", e.released / MIB,
           e.failed ? "fails at " : "both steps served", e.failed ? e.failed_name : "",
           st.reserved / MIB, st.allocated / MIB, st.largest_free / MIB);
    release(&e);
    mem_device_end();

    /* The same script with the plain allocator under the same capacity (a budget on the
     * total in use). */
    Script p = { 0 };
    size_t before = mem_current(MEM_ALL);
    mem_set_budget(MEM_ALL, before + CAPACITY);
    mem_reset_peaks();
    run(&p);
    printf("\n  plain allocator, budget %.0f MiB on the bytes in use: %s, peak in use %.1f MiB\n",
           CAPACITY / MIB, p.failed ? mem_last_error() : "both steps served",
           (mem_peak(MEM_ALL) - before) / MIB);
    release(&p);
    mem_set_budget(MEM_ALL, 0);
}
