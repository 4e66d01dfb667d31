/* The caching device allocator of mem.h (mem_device_begin): a model of PyTorch's CUDA caching
 * allocator, to show fragmentation on a CPU.
 *
 * The "device" has a fixed capacity. Storage is reserved from it in segments (each at least
 * segment_min bytes; a larger request gets a segment of its own size). A request is served by
 * the smallest free block of any segment that holds it (best fit; the first such block on a
 * tie), split when the rest is at least one granule; a freed block stays in its segment, cached,
 * and merges with free neighbours of the same segment. Nothing moves a live block (no
 * compaction), and two segments never merge: they are separate reservations. So free bytes can
 * be plentiful while no one free block, and no new segment within the capacity, holds a
 * request: the allocation fails. mem_device_empty_cache returns the wholly free segments to the
 * device (PyTorch's torch.cuda.empty_cache; PyTorch also does it by itself and retries before
 * it reports out of memory, which this model leaves to the caller, so the failure can be seen).
 *
 * Block metadata lives in host memory (malloc), as the real allocator keeps it; the segments are
 * real memory, so tensors allocated here are usable. */
#include "autograd/mem_device.h"

#include <stdio.h>
#include <stdlib.h>

enum { GRANULE = 512 };   /* every block size is a multiple (PyTorch's smallest block) */

struct DevBlock {
    size_t           offset, size;
    bool             free;
    struct Segment  *segment;
    struct DevBlock *prev, *next;   /* neighbours in the segment, by address */
};

typedef struct Segment {
    unsigned char  *base;
    size_t          size;
    DevBlock       *first;
    struct Segment *next;
} Segment;

static bool     device_on;
static size_t   capacity, segment_min, reserved, allocated;
static Segment *segments;

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

bool mem_device_active(void) { return device_on; }

bool mem_device_begin(size_t cap, size_t seg_min)
{
    if (device_on || cap == 0 || seg_min == 0)
        return false;
    device_on = true;
    capacity = cap;
    segment_min = round_up(seg_min, GRANULE);
    reserved = allocated = 0;
    segments = NULL;
    return true;
}

size_t mem_device_empty_cache(void)
{
    size_t released = 0;
    Segment **link = &segments;
    while (*link) {
        Segment *s = *link;
        if (s->first->free && s->first->size == s->size) {
            *link = s->next;
            released += s->size;
            reserved -= s->size;
            free(s->first);
            free(s->base);
            free(s);
        } else {
            link = &s->next;
        }
    }
    return released;
}

bool mem_device_end(void)
{
    if (!device_on || allocated)
        return false;
    mem_device_empty_cache();
    device_on = false;
    capacity = segment_min = 0;
    return true;
}

MemDeviceStats mem_device_stats(void)
{
    MemDeviceStats st = { .capacity = capacity, .reserved = reserved, .allocated = allocated };
    for (Segment *s = segments; s; s = s->next) {
        st.segments++;
        for (DevBlock *b = s->first; b; b = b->next)
            if (b->free && b->size > st.largest_free)
                st.largest_free = b->size;
    }
    return st;
}

static DevBlock *new_block(Segment *s, size_t offset, size_t size, DevBlock *prev)
{
    DevBlock *b = malloc(sizeof *b);
    if (!b)
        return NULL;
    *b = (DevBlock){ .offset = offset, .size = size, .free = true, .segment = s, .prev = prev };
    return b;
}

static DevBlock *best_fit(size_t size)
{
    DevBlock *best = NULL;
    for (Segment *s = segments; s; s = s->next)
        for (DevBlock *b = s->first; b; b = b->next)
            if (b->free && b->size >= size && (!best || b->size < best->size))
                best = b;
    return best;
}

/* A new segment holding one free block, appended after the others; NULL when it would take
 * the reserved bytes over the capacity (or the system is out of memory). */
static DevBlock *reserve(size_t size, char *why, size_t why_len)
{
    size_t bytes = size > segment_min ? size : segment_min;
    if (reserved + bytes > capacity) {
        snprintf(why, why_len, "no free block holds %zu bytes (the largest is %zu) and a new "
                 "segment of %zu would take the reserved %zu over the capacity %zu (allocated "
                 "%zu)", size, mem_device_stats().largest_free, bytes, reserved, capacity,
                 allocated);
        return NULL;
    }
    Segment *s = malloc(sizeof *s);
    unsigned char *base = aligned_alloc(GRANULE, bytes);
    DevBlock *b = s ? new_block(s, 0, bytes, NULL) : NULL;
    if (!s || !base || !b) {
        free(s);
        free(base);
        free(b);
        snprintf(why, why_len, "the system is out of memory for a segment of %zu bytes", bytes);
        return NULL;
    }
    *s = (Segment){ .base = base, .size = bytes, .first = b };
    Segment **link = &segments;
    while (*link)
        link = &(*link)->next;
    *link = s;
    reserved += bytes;
    return b;
}

void *mem_device_take(size_t bytes, DevBlock **out, char *why, size_t why_len)
{
    size_t size = round_up(bytes, GRANULE);
    DevBlock *b = best_fit(size);
    if (!b)
        b = reserve(size, why, why_len);
    if (!b)
        return NULL;
    if (b->size - size >= GRANULE) {   /* split: the rest stays free, cached */
        DevBlock *rest = new_block(b->segment, b->offset + size, b->size - size, b);
        if (rest) {
            rest->next = b->next;
            if (b->next)
                b->next->prev = rest;
            b->next = rest;
            b->size = size;
        }
    }
    b->free = false;
    allocated += b->size;
    *out = b;
    return b->segment->base + b->offset;
}

/* b absorbs its successor. */
static void merge_next(DevBlock *b)
{
    DevBlock *n = b->next;
    b->size += n->size;
    b->next = n->next;
    if (n->next)
        n->next->prev = b;
    free(n);
}

void mem_device_give(DevBlock *b)
{
    allocated -= b->size;
    b->free = true;
    if (b->next && b->next->free)
        merge_next(b);
    if (b->prev && b->prev->free)
        merge_next(b->prev);
}
