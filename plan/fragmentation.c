/* The fragmentation script (plan/fragmentation.h). */
#include "plan/fragmentation.h"

#include <stdio.h>
#include <string.h>

enum { LAYERS = 4, SLOTS = 16 };
static const double MIB = 1024.0 * 1024.0;

typedef struct {
    void *slot[SLOTS];
    bool  device;
    const FragWatch *watch;      /* NULL: nobody traces */
    FragResult *r;
    MemCategory failed_cat;
} Script;

static void show(const Script *s, const char *what, const char *name, size_t bytes)
{
    if (!s->device || !s->watch || !s->watch->event)
        return;
    MemDeviceStats st = mem_device_stats();
    s->watch->event(s->watch->ctx, what, name, bytes, &st);
}

/* A request of `mib` MiB, less the 64-byte header, so a device block is exactly that size. */
static bool take(Script *s, int slot, const char *name, MemCategory cat, double mib)
{
    if (s->r->failed)
        return false;
    size_t bytes = (size_t)(mib * MIB) - 64;
    s->slot[slot] = mem_try_alloc(cat, bytes);
    if (!s->slot[slot]) {
        s->r->failed = true;
        snprintf(s->r->failed_name, sizeof s->r->failed_name, "%s", name);
        snprintf(s->r->error, sizeof s->r->error, "%s", mem_last_error());
        s->r->failed_bytes = bytes + 64;
        s->failed_cat = cat;
        return false;
    }
    show(s, "alloc", name, bytes + 64);
    return true;
}

static void drop(Script *s, int slot, const char *name)
{
    if (!s->slot[slot] || s->r->failed)
        return;
    size_t bytes = mem_size(s->slot[slot]) + 64;
    mem_free(s->slot[slot]);
    s->slot[slot] = NULL;
    show(s, "free", name, bytes);
}

/* Slots: 0 params, 1 grads, 2 and 3 Adam's m and v, 4.. 4+LAYERS-1 the blocks' activations,
 * 8 scratch, 9 logits, 10 their gradient, 11 and 12 the activation gradients. */
static void step(Script *s, int k, double scale)
{
    char name[40];
    for (int l = 0; l < LAYERS && !s->r->failed; l++) {
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
    for (int l = LAYERS - 1; l >= 0 && !s->r->failed; l--) {
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

/* Frees every block, traced by nobody. */
static void release(Script *s)
{
    bool failed = s->r->failed;
    s->r->failed = false;
    s->watch = NULL;
    for (int i = 0; i < SLOTS; i++)
        drop(s, i, "the rest");
    s->r->failed = failed;
}

static void run(Script *s, bool empty_between)
{
    take(s, 0, "params", MEM_PARAM, 2.0);
    take(s, 1, "grads", MEM_GRAD, 2.0);
    step(s, 1, 1.0);
    if (empty_between)
        s->r->released_between = mem_device_empty_cache();
    step(s, 2, 2.0);
}

void frag_run_device(bool empty_between, const FragWatch *watch, FragResult *r)
{
    memset(r, 0, sizeof *r);
    Script s = { .device = true, .watch = watch, .r = r };
    mem_device_begin(FRAG_CAPACITY, FRAG_SEGMENT);
    run(&s, empty_between);
    r->end = mem_device_stats();
    if (r->failed) {
        r->released_after = mem_device_empty_cache();
        void *retry = mem_try_alloc(s.failed_cat, r->failed_bytes - 64);
        r->retry_served = retry != NULL;
        r->after_retry = mem_device_stats();
        mem_free(retry);
    }
    release(&s);
    mem_device_end();
}

void frag_run_plain(FragResult *r)
{
    memset(r, 0, sizeof *r);
    Script s = { .r = r };
    size_t before = mem_current(MEM_ALL);
    mem_set_budget(MEM_ALL, before + FRAG_CAPACITY);
    mem_reset_peaks();
    run(&s, false);
    r->peak_in_use = mem_peak(MEM_ALL) - before;
    release(&s);
    mem_set_budget(MEM_ALL, 0);
}
