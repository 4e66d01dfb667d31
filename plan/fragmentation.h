#ifndef TAPEGRAD_PLAN_FRAGMENTATION_H
#define TAPEGRAD_PLAN_FRAGMENTATION_H
/* The lecture's "out of memory despite available memory, as contiguous blocks are required"
 * (memory_calculator --fragmentation, docs/memory.md), played on autograd/mem's caching device
 * allocator (mem_device_begin, a model of PyTorch's).
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
 * allocator, under the same capacity as a budget on the bytes in use, serves both steps.
 *
 * Each function leaves the allocator as it found it (every block freed, the device mode off,
 * no budget). */
#include <stdbool.h>
#include <stddef.h>

#include "autograd/mem.h"

enum { FRAG_CAPACITY = 54u << 20, FRAG_SEGMENT = 8u << 20 };

/* Who watches the device's blocks: after each allocation or release ("alloc", "free") of a
 * block of `bytes` (its header included) named `name`, with the device's state then. */
typedef struct {
    void (*event)(void *ctx, const char *what, const char *name, size_t bytes,
                  const MemDeviceStats *st);
    void *ctx;
} FragWatch;

typedef struct {
    bool           failed;            /* a request failed: the script stopped there */
    char           failed_name[40];   /* which ("step 2 dlogits") */
    size_t         failed_bytes;      /* its size, header included */
    char           error[640];        /* the allocator's message (mem_last_error) */
    MemDeviceStats end;               /* the device when the script stopped */
    size_t         released_between;  /* by an empty_cache between the steps */
    /* After a failure: the cache emptied (bytes released), the request tried again. */
    size_t         released_after;
    bool           retry_served;
    MemDeviceStats after_retry;
    size_t         peak_in_use;       /* the plain allocator's peak bytes in use */
} FragResult;

/* The script on the device allocator (FRAG_CAPACITY, FRAG_SEGMENT); empty_between: the cache
 * emptied between the steps (torch.cuda.empty_cache() in the loop). watch may be NULL. */
void frag_run_device(bool empty_between, const FragWatch *watch, FragResult *r);
/* The same script on the plain allocator, under FRAG_CAPACITY as a budget on the bytes in use. */
void frag_run_plain(FragResult *r);

#endif
