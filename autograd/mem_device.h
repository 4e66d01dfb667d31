#ifndef TAPEGRAD_MEM_DEVICE_H
#define TAPEGRAD_MEM_DEVICE_H
/* The caching device allocator behind mem.h's device mode: mem.c's side of it. The public
 * calls (mem_device_begin, _end, _empty_cache, _stats) are declared in mem.h. */
#include "autograd/mem.h"

typedef struct DevBlock DevBlock;

bool  mem_device_active(void);
/* Storage for `bytes` (a multiple of 64: mem.c's header and rounded storage) from the device,
 * with its block in *out; NULL, and the reason in why, when no free block and no new segment
 * holds it. */
void *mem_device_take(size_t bytes, DevBlock **out, char *why, size_t why_len);
/* The block back to its segment's cache. */
void  mem_device_give(DevBlock *b);

#endif
