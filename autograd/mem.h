#ifndef TAPEGRAD_MEM_H
#define TAPEGRAD_MEM_H
/* The accounting allocator: every byte of tensor storage is allocated here, in exactly one
 * memory category, so the memory figures the examples print are measured, not computed.
 *
 * Categories: param (model weights), grad (parameter gradients), optim (optimizer state and
 * fp32 master weights), act (activations saved for backward), temp (scratch buffers and the
 * activation gradients of the backward pass, which live only until consumed).
 *
 * Freed blocks are kept in a cache by exact size and handed out again, so a training loop whose
 * shapes repeat makes no system allocation after its first step (PyTorch's caching allocator
 * does the same). The categories count bytes in use, never cached bytes: freeing still returns
 * a category to zero. The cache is off under AddressSanitizer, so use-after-free is caught.
 *
 * Not thread-safe: allocate and free outside OpenMP parallel regions. */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef enum {
    MEM_PARAM,
    MEM_GRAD,
    MEM_OPTIM,
    MEM_ACT,
    MEM_TEMP,
    MEM_NCAT,       /* number of categories; as a budget target it means "all of them" */
} MemCategory;

#define MEM_ALL MEM_NCAT

typedef struct {
    size_t current[MEM_NCAT + 1];   /* index MEM_ALL holds the total */
    size_t peak[MEM_NCAT + 1];      /* highest value of current[] since the last reset */
    size_t requests;                /* successful mem_alloc calls since start */
    size_t system_allocations;      /* of those, the ones the cache could not serve */
    size_t cached_bytes;            /* freed storage held for reuse, in no category */
    /* The host pool (below): its bytes in use and peaks, by category, outside current[] and
     * peak[]; and mem_transfer's bytes each way since start. */
    size_t host_current[MEM_NCAT + 1];
    size_t host_peak[MEM_NCAT + 1];
    size_t to_host_bytes, to_device_bytes;
} MemStats;

/* 64-byte aligned, uninitialised storage of `bytes`, counted in `cat`. On failure (over budget,
 * or out of memory) returns NULL and mem_last_error() says why. */
void       *mem_try_alloc(MemCategory cat, size_t bytes);
/* Like mem_try_alloc, but prints the reason and exits the program on failure. */
void       *mem_alloc(MemCategory cat, size_t bytes);
/* Zero-filled mem_alloc. */
void       *mem_calloc(MemCategory cat, size_t bytes);
/* Frees storage from mem_alloc; NULL is allowed. The category and size come from the block. */
void        mem_free(void *p);
/* Size and category of a live block. */
size_t      mem_size(const void *p);
MemCategory mem_category(const void *p);

MemStats    mem_stats(void);
/* Returns every cached block to the system (also done at exit). */
void        mem_release_cache(void);
size_t      mem_current(MemCategory cat);   /* cat may be MEM_ALL */
size_t      mem_peak(MemCategory cat);
/* Peaks restart from the current values, so the next phase's peak can be measured alone. */
void        mem_reset_peaks(void);

/* An optional limit on one category's current bytes, or on the total with MEM_ALL; 0 removes
 * it. A budget of N bytes admits allocations up to exactly N bytes in use; one byte more fails
 * (mem_try_alloc returns NULL, mem_alloc prints the reason and exits 1) with a message naming
 * the category, the request, the bytes in use and the limit, each also in exact bytes. */
void        mem_set_budget(MemCategory cat, size_t bytes);
const char *mem_last_error(void);

/* Device mode: a caching allocator with a fixed capacity, PyTorch's style (mem_device.c says
 * how it works), to show fragmentation. While it is on, every allocation takes a block of
 * round_up(64 + round_up(bytes, 64), 512) bytes (the header, the storage, the granule) from
 * segments of at least segment_min bytes reserved from the capacity; freed blocks stay cached in
 * their segments. A request that no free block and no new segment can hold fails through
 * mem_try_alloc ("out of memory on the device: ..."). The categories, peaks and budgets count as
 * always. Off by default: the plain allocator above is unchanged by it. */
typedef struct {
    size_t capacity;
    size_t reserved;        /* bytes of the segments */
    size_t allocated;       /* bytes of the blocks in use (headers and rounding included) */
    size_t largest_free;    /* the largest free block in any segment */
    int    segments;
} MemDeviceStats;

/* False if the mode is on already or an argument is 0. */
bool           mem_device_begin(size_t capacity, size_t segment_min);
/* Back to the plain allocator: false (and nothing done) while a device block is in use. */
bool           mem_device_end(void);
/* Returns every wholly free segment to the device; the bytes released. */
size_t         mem_device_empty_cache(void);
MemDeviceStats mem_device_stats(void);

/* The host pool: memory beside the "device" (ZeRO-Offload's CPU memory, the device being the
 * accounted memory with its budgets and device mode). While a category's bit (1u << cat) is in
 * the host mask, its allocations come from the host pool: counted in host_current/host_peak
 * by category, never in current[] or peak[], under no budget, never from the device mode's
 * segments. mem_free, mem_size and mem_category work on either. Bytes cross between the two
 * only through mem_transfer, which counts them: the "PCIe" traffic. optim/offload.h keeps the
 * optimizer's state there and runs the update there. */
enum { MEM_HOST_NONE = 0u, MEM_HOST_EVERY = (1u << MEM_NCAT) - 1u };
/* Sets the mask, returns the previous one. */
unsigned    mem_host_categories(unsigned mask);
bool        mem_is_host(const void *p);
size_t      mem_host_current(MemCategory cat);  /* cat may be MEM_ALL */
size_t      mem_host_peak(MemCategory cat);
/* Copies bytes from the start of block src to the start of block dst, one on the device and the
 * other on the host (anything else is a programming error), counted in to_host_bytes or
 * to_device_bytes. */
void        mem_transfer(void *dst, const void *src, size_t bytes);

const char *mem_category_name(MemCategory cat);    /* "param", ..., "temp", "total" */
/* A table of current and peak bytes per category. */
void        mem_report(FILE *out);
/* Bytes in MiB (2^20 bytes), for tables that print them as a number. */
double      mem_mib(double bytes);
/* "12.3 MiB" style text for a byte count, in a caller's buffer. */
const char *mem_format_bytes(size_t bytes, char *buf, size_t len);

#endif
