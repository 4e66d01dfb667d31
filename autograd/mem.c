#include "autograd/mem.h"
#include "autograd/mem_device.h"
#include "autograd/tensor.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Each block carries a 64-byte header in front of the caller's storage: the size and category
 * needed to undo the accounting in mem_free, padded so the storage stays 64-byte aligned (one
 * cache line, and the widest vector load). */
enum { HEADER_BYTES = 64 };
static const uint32_t BLOCK_MAGIC = 0x7461706fu;

typedef struct {
    size_t    bytes;
    uint32_t  cat;
    uint32_t  magic;
    DevBlock *device;     /* the device block under mem_device_begin, else NULL */
    bool      host;       /* in the host pool (counted in host_current) */
} BlockHeader;

/* The cache: one list of free blocks per distinct block size. A training step uses a few
 * dozen sizes, so a short array searched linearly is enough. */
enum { CACHE_SIZES = 256 };
typedef struct CachedBlock {
    struct CachedBlock *next;
} CachedBlock;
typedef struct {
    size_t       total;     /* block size including the header */
    CachedBlock *head;
} CacheList;

#if defined(__SANITIZE_ADDRESS__)
static const bool cache_enabled = false;
#else
static const bool cache_enabled = true;
#endif
static CacheList cache[CACHE_SIZES];
static int       n_cache;
static bool      release_at_exit;

static MemStats stats;
static size_t   budget[MEM_NCAT + 1];
static unsigned host_mask;
static char     last_error[640];

static const char *const category_names[MEM_NCAT + 1] = {
    "param", "grad", "optim", "act", "temp", "total",
};

const char *mem_category_name(MemCategory cat)
{
    return (unsigned)cat <= MEM_NCAT ? category_names[cat] : "?";
}

const char *mem_last_error(void) { return last_error; }

void mem_set_budget(MemCategory cat, size_t bytes) { budget[cat] = bytes; }

static bool over_budget(MemCategory cat, size_t bytes)
{
    const MemCategory checked[2] = { cat, MEM_ALL };
    for (int i = 0; i < 2; i++) {
        MemCategory c = checked[i];
        if (budget[c] && stats.current[c] + bytes > budget[c]) {
            char want[32], used[32], limit[32];
            /* The exact byte counts beside the rounded ones: a student comparing the failure
             * with the calculator's prediction needs the bytes, not "63.9 MiB". */
            snprintf(last_error, sizeof last_error,
                     "memory budget exceeded: %s allocation of %s (%zu bytes) with %s (%zu bytes) "
                     "of %s in use, budget %s (%zu bytes)",
                     mem_category_name(cat), mem_format_bytes(bytes, want, sizeof want), bytes,
                     mem_format_bytes(stats.current[c], used, sizeof used), stats.current[c],
                     mem_category_name(c), mem_format_bytes(budget[c], limit, sizeof limit),
                     budget[c]);
            return true;
        }
    }
    return false;
}

static void count(MemCategory cat, size_t bytes, bool add, bool host)
{
    size_t *current = host ? stats.host_current : stats.current;
    size_t *peak = host ? stats.host_peak : stats.peak;
    const MemCategory counted[2] = { cat, MEM_ALL };
    for (int i = 0; i < 2; i++) {
        MemCategory c = counted[i];
        if (add) {
            current[c] += bytes;
            if (current[c] > peak[c])
                peak[c] = current[c];
        } else {
            current[c] -= bytes;
        }
    }
}

/* Header plus storage rounded up to the alignment (aligned_alloc wants a multiple of it). */
static size_t block_total(size_t bytes)
{
    return HEADER_BYTES + ((bytes + 63u) & ~(size_t)63u);
}

static CacheList *cache_list(size_t total, bool create)
{
    for (int i = 0; i < n_cache; i++)
        if (cache[i].total == total)
            return &cache[i];
    if (!create || n_cache == CACHE_SIZES)
        return NULL;
    cache[n_cache].total = total;
    cache[n_cache].head = NULL;
    return &cache[n_cache++];
}

static void *cache_take(size_t total)
{
    CacheList *list = cache_enabled ? cache_list(total, false) : NULL;
    if (!list || !list->head)
        return NULL;
    CachedBlock *b = list->head;
    list->head = b->next;
    stats.cached_bytes -= total;
    return b;
}

/* True when the block was kept for reuse. */
static bool cache_put(void *block, size_t total)
{
    CacheList *list = cache_enabled ? cache_list(total, true) : NULL;
    if (!list)
        return false;
    CachedBlock *b = block;
    b->next = list->head;
    list->head = b;
    stats.cached_bytes += total;
    return true;
}

void mem_release_cache(void)
{
    for (int i = 0; i < n_cache; i++) {
        while (cache[i].head) {
            CachedBlock *b = cache[i].head;
            cache[i].head = b->next;
            free(b);
        }
    }
    n_cache = 0;
    stats.cached_bytes = 0;
}

static void *system_alloc(size_t total)
{
    if (!release_at_exit) {
        atexit(mem_release_cache);
        release_at_exit = true;
    }
    void *block = aligned_alloc(HEADER_BYTES, total);
    if (!block && stats.cached_bytes) {
        mem_release_cache();    /* cached blocks of other sizes may make room */
        block = aligned_alloc(HEADER_BYTES, total);
    }
    if (block)
        stats.system_allocations++;
    return block;
}

void *mem_try_alloc(MemCategory cat, size_t bytes)
{
    if ((unsigned)cat >= MEM_NCAT) {
        snprintf(last_error, sizeof last_error, "invalid memory category %d", (int)cat);
        return NULL;
    }
    bool host = host_mask >> cat & 1u;
    if (!host && over_budget(cat, bytes))
        return NULL;
    size_t total = block_total(bytes);
    DevBlock *device = NULL;
    unsigned char *block;
    if (!host && mem_device_active()) {
        char why[320], want[32];
        block = mem_device_take(total, &device, why, sizeof why);
        if (!block) {
            snprintf(last_error, sizeof last_error,
                     "out of memory on the device: %s allocation of %s (%zu bytes): %s",
                     mem_category_name(cat), mem_format_bytes(bytes, want, sizeof want), bytes,
                     why);
            return NULL;
        }
    } else {
        block = cache_take(total);
        if (!block)
            block = system_alloc(total);
    }
    if (!block) {
        char want[32];
        snprintf(last_error, sizeof last_error, "out of memory: %s allocation of %s",
                 mem_category_name(cat), mem_format_bytes(bytes, want, sizeof want));
        return NULL;
    }
    BlockHeader *h = (BlockHeader *)block;
    h->bytes = bytes;
    h->cat = (uint32_t)cat;
    h->magic = BLOCK_MAGIC;
    h->device = device;
    h->host = host;
    count(cat, bytes, true, host);
    stats.requests++;
    return block + HEADER_BYTES;
}

void *mem_alloc(MemCategory cat, size_t bytes)
{
    void *p = mem_try_alloc(cat, bytes);
    if (!p) {
        fprintf(stderr, "%s: %s\n", tensor_program(), last_error);
        exit(1);
    }
    return p;
}

void *mem_calloc(MemCategory cat, size_t bytes)
{
    void *p = mem_alloc(cat, bytes);
    memset(p, 0, bytes);
    return p;
}

static BlockHeader *header_of(const void *p)
{
    BlockHeader *h = (BlockHeader *)((unsigned char *)p - HEADER_BYTES);
    if (h->magic != BLOCK_MAGIC) {
        fprintf(stderr, "%s: mem_free of a pointer that mem_alloc did not return\n",
                tensor_program());
        abort();
    }
    return h;
}

void mem_free(void *p)
{
    if (!p)
        return;
    BlockHeader *h = header_of(p);
    count((MemCategory)h->cat, h->bytes, false, h->host);
    size_t total = block_total(h->bytes);
    h->magic = 0;
    if (h->device)
        mem_device_give(h->device);
    else if (!cache_put(h, total))
        free(h);
}

size_t mem_size(const void *p) { return header_of(p)->bytes; }

MemCategory mem_category(const void *p) { return (MemCategory)header_of(p)->cat; }

MemStats mem_stats(void) { return stats; }

size_t mem_current(MemCategory cat) { return stats.current[cat]; }

size_t mem_peak(MemCategory cat) { return stats.peak[cat]; }

void mem_reset_peaks(void)
{
    for (int c = 0; c <= MEM_NCAT; c++) {
        stats.peak[c] = stats.current[c];
        stats.host_peak[c] = stats.host_current[c];
    }
}

/* The host pool ---------------------------------------------------------------------------- */

unsigned mem_host_categories(unsigned mask)
{
    unsigned old = host_mask;
    host_mask = mask & MEM_HOST_EVERY;
    return old;
}

bool mem_is_host(const void *p) { return header_of(p)->host; }

size_t mem_host_current(MemCategory cat) { return stats.host_current[cat]; }

size_t mem_host_peak(MemCategory cat) { return stats.host_peak[cat]; }

void mem_transfer(void *dst, const void *src, size_t bytes)
{
    const BlockHeader *d = header_of(dst), *s = header_of(src);
    if (d->host == s->host || bytes > d->bytes || bytes > s->bytes) {
        fprintf(stderr, "%s: mem_transfer of %zu bytes from a %s block of %zu to a %s block of "
                "%zu: one must be on the host, the other on the device, both that large\n",
                tensor_program(), bytes, s->host ? "host" : "device", s->bytes,
                d->host ? "host" : "device", d->bytes);
        abort();
    }
    memcpy(dst, src, bytes);
    if (d->host)
        stats.to_host_bytes += bytes;
    else
        stats.to_device_bytes += bytes;
}

double mem_mib(double bytes) { return bytes / (1024.0 * 1024.0); }

const char *mem_format_bytes(size_t bytes, char *buf, size_t len)
{
    static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%zu B", bytes);
    else
        snprintf(buf, len, "%.1f %s", v, units[u]);
    return buf;
}

void mem_report(FILE *out)
{
    fprintf(out, "%-8s %14s %14s\n", "category", "current", "peak");
    for (int c = 0; c <= MEM_NCAT; c++) {
        char cur[32], pk[32];
        fprintf(out, "%-8s %14s %14s\n", mem_category_name((MemCategory)c),
                mem_format_bytes(stats.current[c], cur, sizeof cur),
                mem_format_bytes(stats.peak[c], pk, sizeof pk));
    }
}
