#ifndef TAPEGRAD_WIRE_H
#define TAPEGRAD_WIRE_H
/* What the gradient collectives put on the wire (dist/comm.h's _wire forms): mixed precision
 * applied to communication, as the lecture's FSDP slide and ZeRO++ do. A message of n values is
 *
 *     fp32   4 n bytes, the values themselves
 *     bf16   2 n bytes, each value rounded to nearest even
 *     e5m2   4 + n bytes: a power-of-two scale s, then each value times s rounded to e5m2
 *            (nearest even); s is the largest power of two with amax s <= 57344 (e5m2's
 *            largest finite), 1 when the message is all zeros or holds an inf or a NaN, so an
 *            overflow still reaches the loss scaler's check as an inf
 *
 * Decoding gives floats again (e5m2's divided by s, exact: s is a power of two), and the
 * receiving rank sums them in fp32, in rank order, as with fp32 messages: the result is still
 * the same bits on every rank and in every run. Each rank rounds its own term the way the wire
 * rounds the others' (dist_wire_round), so every term of a sum has been through the wire once;
 * a single process that rounds each term the same way and adds in rank order gets the same bits
 * (dist/ddp.h's reference). The scale is chosen per message, that is per piece of a shard, so
 * a reference for e5m2 must cut the vector as the collective does. */
#include <stddef.h>

typedef enum { DIST_WIRE_FP32, DIST_WIRE_BF16, DIST_WIRE_E5M2, DIST_WIRE_COUNT } DistWire;

/* "fp32", "bf16", "e5m2" (NULL-terminated, indexed by DistWire); the wire of a name, -1 if
 * none. */
extern const char *const DIST_WIRE_NAMES[];
int    dist_wire_parse(const char *name);

/* Bytes of a message of n values. */
size_t dist_wire_bytes(DistWire w, size_t n);
/* x[n] into a message of dist_wire_bytes(w, n) bytes, and back into y[n]. */
void   dist_wire_encode(DistWire w, const float *x, size_t n, void *msg);
void   dist_wire_decode(DistWire w, const void *msg, size_t n, float *y);
/* y = decode(encode(x)): x as a receiver sees it (x == y allowed). */
void   dist_wire_round(DistWire w, const float *x, float *y, size_t n);

#endif
