#ifndef TAPEGRAD_SNAPSHOT_H
#define TAPEGRAD_SNAPSHOT_H
/* Snapshots: training state on disk, as safetensors files that numpy and PyTorch can read.
 *
 * Layout (little-endian throughout):
 *
 *     8 bytes   N, a u64: the length of the header
 *     N bytes   the header: a UTF-8 JSON object, padded with spaces so that 8 + N is a
 *               multiple of 8 (the data buffer then starts 8-byte aligned, as the reference
 *               writer does, so a reader that maps the file can use tensors in place)
 *     the rest  the data buffer: each tensor's raw bytes, row-major, back to back
 *
 *     {"__metadata__": {"step": "1200", ...},
 *      "wte": {"dtype": "F32", "shape": [65, 128], "data_offsets": [0, 33280]}, ...}
 *
 * data_offsets are [begin, end) in bytes from the start of the data buffer. A valid file has
 * offsets that, sorted, tile the buffer exactly: no gap, no overlap, nothing after the last
 * tensor, and each range holds exactly elements(shape) * size(dtype) bytes. "__metadata__" is
 * optional and maps strings to strings.
 *
 * Writing is atomic: the file is written to "PATH.tmp.<pid>" in the same directory, flushed to
 * disk (fsync), then renamed over PATH. On any failure the temporary file is removed and PATH
 * is left as it was, so a crash or a full disk never destroys the previous snapshot.
 *
 * Reading validates the whole header against the file's size before anything is returned
 * (header length, JSON, dtypes, shapes, offsets, full coverage), keeps only the header in
 * memory, and reads a tensor's bytes from the file when the caller asks for it, straight into
 * the caller's storage, after checking its dtype and exact shape.
 *
 * What a trainer saves, and how:
 *   - weights, fp32 master weights, optimizer moments: tensors (snapshot_add_tensor), named
 *     by the model ("blocks.0.attn.qkv.weight") with a prefix for optimizer state
 *     ("adam.m.blocks.0.attn.qkv.weight"); packed low-precision weights and NF4 codes as U8 or
 *     BF16/F16 tensors with their block constants as separate F32 tensors.
 *   - the step, the number of tokens seen, anything else that is one integer: metadata as a
 *     decimal string (snapshot_add_meta_u64), exact for every uint64.
 *   - scalars such as the dynamic loss scale: metadata in "%.17g" form (snapshot_add_meta_f64),
 *     which reads back to the identical double.
 *   - RNG state: snapshot_add_rng stores an Rng's two words as "<prefix>.state" and
 *     "<prefix>.inc" in metadata; snapshot_read_rng restores it exactly, so the run continues
 *     with the very numbers it would have drawn. Bulk integer state (a per-row table of seeds,
 *     a bit mask) fits an I64 or U8 tensor.
 *
 * Every failure returns false (or NULL) and fills a SnapshotError with one line that starts
 * with the file's path and names the problem, for example
 *     "run/snap.safetensors: truncated: the header length is 1234 bytes, 100 bytes follow it"
 *     "run/snap.safetensors: shape of 'wte' is [65, 128] in the file, [65, 64] expected"
 * Bad files never abort the program. The err argument may be NULL when the message is not
 * wanted. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "autograd/rng.h"
#include "autograd/tensor.h"

enum {
    SNAPSHOT_MAX_DIMS = 8,                     /* of a tensor in a file; tapegrad uses up to 4 */
    SNAPSHOT_ERROR_LEN = 512,
};

/* The largest header accepted, as the reference implementation: a corrupt length field must
 * not make us allocate gigabytes. */
#define SNAPSHOT_MAX_HEADER ((uint64_t)100000000)

typedef enum {
    SNAPSHOT_F32,
    SNAPSHOT_BF16,
    SNAPSHOT_F16,
    SNAPSHOT_U8,
    SNAPSHOT_I32,
    SNAPSHOT_I64,
    SNAPSHOT_NDTYPES,
} SnapshotDtype;

typedef struct {
    char message[SNAPSHOT_ERROR_LEN];
} SnapshotError;

/* One tensor of a file, as its header describes it. */
typedef struct {
    const char   *name;
    SnapshotDtype dtype;
    int           ndim;                        /* 0 for a scalar */
    int64_t       shape[SNAPSHOT_MAX_DIMS];
    uint64_t      begin, end;                  /* byte range within the data buffer */
} SnapshotEntry;

typedef struct SnapshotWriter SnapshotWriter;
typedef struct SnapshotReader SnapshotReader;

/* "F32", "BF16", ... as the header spells them; bytes per element. */
const char *snapshot_dtype_name(SnapshotDtype dtype);
size_t      snapshot_dtype_size(SnapshotDtype dtype);
/* The dtype a header name stands for; false if it is not one tapegrad knows. */
bool        snapshot_dtype_parse(const char *name, SnapshotDtype *out);

/* Writing ------------------------------------------------------------------------------------ */

SnapshotWriter *snapshot_writer_new(void);
void            snapshot_writer_free(SnapshotWriter *w);

/* Adds a tensor of ndim (0..SNAPSHOT_MAX_DIMS) dimensions, each >= 0, whose bytes start at
 * data. The writer keeps the pointer, not a copy: data must stay valid until snapshot_write.
 * Tensors are laid out in the order they are added. A bad entry (an empty, duplicate or
 * non-UTF-8 name, "__metadata__", a negative dimension) returns false; the writer remembers the
 * first such error and snapshot_write reports it, so callers may check only the write. */
bool snapshot_add(SnapshotWriter *w, const char *name, SnapshotDtype dtype, int ndim,
                  const int64_t *shape, const void *data, SnapshotError *err);
/* A tapegrad tensor under name (t->name when name is NULL), in its own dtype and shape. */
bool snapshot_add_tensor(SnapshotWriter *w, const char *name, const Tensor *t,
                         SnapshotError *err);
/* Metadata: a string value, copied. Keys are unique. */
bool snapshot_add_meta(SnapshotWriter *w, const char *key, const char *value,
                       SnapshotError *err);
bool snapshot_add_meta_u64(SnapshotWriter *w, const char *key, uint64_t value,
                           SnapshotError *err);
bool snapshot_add_meta_f64(SnapshotWriter *w, const char *key, double value,
                           SnapshotError *err);
/* Metadata "<prefix>.state" and "<prefix>.inc". */
bool snapshot_add_rng(SnapshotWriter *w, const char *prefix, const Rng *rng, SnapshotError *err);

/* Writes everything added so far to path, atomically (see above). */
bool snapshot_write(const SnapshotWriter *w, const char *path, SnapshotError *err);

/* Reading ------------------------------------------------------------------------------------ */

/* Opens and validates path; NULL with the reason in err if it is not a valid snapshot. */
SnapshotReader *snapshot_open(const char *path, SnapshotError *err);
void            snapshot_close(SnapshotReader *r);

/* The tensors, in the order of their bytes in the file (index 0 .. count-1). */
int                  snapshot_count(const SnapshotReader *r);
const SnapshotEntry *snapshot_entry(const SnapshotReader *r, int index);
/* The tensor called name, or NULL. */
const SnapshotEntry *snapshot_find(const SnapshotReader *r, const char *name);

/* Copies tensor name into dst, which holds elements(shape) * size(dtype) bytes, after checking
 * that the file has it with exactly this dtype and shape. */
bool snapshot_read(SnapshotReader *r, const char *name, SnapshotDtype dtype, int ndim,
                   const int64_t *shape, void *dst, SnapshotError *err);
/* The same into a tapegrad tensor, whose dtype and shape the file must match (name NULL:
 * t->name). */
bool snapshot_read_tensor(SnapshotReader *r, const char *name, Tensor *t, SnapshotError *err);

/* Checks that the file holds exactly the tensors in names[0..n): reports the first name of the
 * list that the file lacks ("missing tensor"), else the first tensor of the file that is not in
 * the list ("unknown tensor"). */
bool snapshot_check_names(const SnapshotReader *r, const char *const *names, int n,
                          SnapshotError *err);

/* Metadata in file order; the value for key, or NULL when absent. */
int         snapshot_meta_count(const SnapshotReader *r);
const char *snapshot_meta_key(const SnapshotReader *r, int index);
const char *snapshot_meta(const SnapshotReader *r, const char *key);
/* Metadata parsed back; false if absent or not a number in the written form. */
bool snapshot_meta_u64(const SnapshotReader *r, const char *key, uint64_t *out,
                       SnapshotError *err);
bool snapshot_meta_f64(const SnapshotReader *r, const char *key, double *out,
                       SnapshotError *err);
bool snapshot_read_rng(const SnapshotReader *r, const char *prefix, Rng *out,
                       SnapshotError *err);

#endif
