#ifndef TAPEGRAD_SNAPSHOT_INTERNAL_H
#define TAPEGRAD_SNAPSHOT_INTERNAL_H
/* What the snapshot writer (snapshot.c) and reader (snapshot_read.c) share. Not for other
 * modules: use autograd/snapshot.h. */
#include "autograd/snapshot.h"

/* Tensor bytes go to disk as they lie in memory, and the format is little-endian. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "autograd/snapshot assumes a little-endian machine"
#endif

/* cJSON holds numbers as doubles, which are exact integers only up to 2^53: larger sizes and
 * offsets are refused rather than silently rounded. (2^53 bytes is 8 PiB.) */
#define SNAPSHOT_MAX_JSON_INT ((uint64_t)1 << 53)
#define SNAPSHOT_METADATA_KEY "__metadata__"

typedef struct {
    char *key, *value;
} SnapshotMeta;

/* "path: message" into err when err is given (path NULL: the message alone). Always returns
 * false, so callers can `return snapshot_fail(...)`. */
bool snapshot_fail(SnapshotError *err, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* RFC 3629 UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF. */
bool snapshot_utf8_valid(const char *s, size_t n);
/* Bytes of a tensor of this dtype and shape (dimensions >= 0); false past 2^53. */
bool snapshot_tensor_bytes(SnapshotDtype dtype, int ndim, const int64_t *shape, uint64_t *bytes);
/* "[65, 128]", "[]" for a scalar. */
const char *snapshot_shape_str(int ndim, const int64_t *shape, char *buf, size_t len);
/* The snapshot dtype and shape of a tapegrad tensor; false for a dtype snapshots lack. */
bool snapshot_tensor_layout(const Tensor *t, SnapshotDtype *dtype, int64_t *shape);
/* "<prefix>.<field>", the metadata keys of an Rng; false when it does not fit in len. */
bool snapshot_rng_key(char *key, size_t len, const char *prefix, const char *field);
void snapshot_free_meta(SnapshotMeta *meta, int n);

#endif
