#ifndef TAPEGRAD_COMM_H
#define TAPEGRAD_COMM_H
/* The communicator: the only code in tapegrad that calls MPI, and the place where every byte a
 * rank puts on the wire or takes off it is counted. Training on many ranks (data parallel,
 * ZeRO, pipelines) is built on these few calls, so "bytes on the wire" is a measured number:
 * the payload bytes this rank handed to MPI_Send/Isend and received through MPI_Recv/Irecv
 * (MPI's own envelopes are not counted; they are a few dozen bytes per message).
 *
 * The collectives are written here on top of point-to-point messages rather than taken from
 * MPI, for two reasons a reader can check:
 *   - the bytes each rank sends are then exactly the ones counted, whatever algorithm the MPI
 *     library would have picked, and they are the textbook volumes: an all-reduce of n values
 *     over N ranks sends 2 n (N-1)/N values per rank (reduce-scatter, then all-gather);
 *   - the order of the sums is fixed: every element is reduced as ((x_0 + x_1) + x_2) + ...,
 *     in rank order, on whichever rank owns it, so N ranks give the bits one process gets by
 *     adding the same N terms in the same order (MPI_Allreduce promises no order).
 *
 * Sharding: a vector of n values is cut into N contiguous shards, rank r owning
 * [dist_shard_begin(n, N, r), dist_shard_begin(n, N, r + 1)); the first n % N shards are one
 * value longer.
 *
 * Running as root (containers, this project's CI): OpenMPI's mpirun refuses unless told
 * otherwise; scripts/mpirun adds the switches (and --oversubscribe when ranks outnumber the
 * cores). A program started without mpirun is a world of one rank. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#include "dist/wire.h"

typedef struct {
    MPI_Comm  comm;
    int       rank, size;
    uint64_t  bytes_sent, bytes_recv;      /* payload bytes since the last dist_reset_counts */
    uint64_t  messages_sent;
} DistComm;

/* MPI_Init (thread level "funneled": OpenMP threads compute, only the main thread talks) and
 * the world communicator; dist_finalize ends MPI. A program calls both once, from main. */
void      dist_init(int *argc, char ***argv);
void      dist_finalize(void);
bool      dist_initialized(void);
DistComm *dist_world(void);
/* Ranks with the same color form a sub-communicator, ordered by key (then by world rank); a
 * rank passing color < 0 gets NULL. Collective over parent. Free with dist_comm_free. */
DistComm *dist_split(DistComm *parent, int color, int key);
void      dist_comm_free(DistComm *c);
void      dist_reset_counts(DistComm *c);

/* Shards of n values over size ranks (see above). */
size_t    dist_shard_begin(size_t n, int size, int rank);
size_t    dist_shard_count(size_t n, int size, int rank);

/* Point-to-point, counted. Tags must be >= 0 and < DIST_TAG_COLLECTIVE (reserved below). */
enum { DIST_TAG_COLLECTIVE = 30000 };
void      dist_send(DistComm *c, const void *buf, size_t bytes, int dest, int tag);
void      dist_recv(DistComm *c, void *buf, size_t bytes, int src, int tag);
typedef struct { MPI_Request req; } DistRequest;
DistRequest dist_isend(DistComm *c, const void *buf, size_t bytes, int dest, int tag);
DistRequest dist_irecv(DistComm *c, void *buf, size_t bytes, int src, int tag);
void      dist_wait(DistRequest *r);
bool      dist_test(DistRequest *r);              /* true when complete (and then freed) */

/* Collectives, blocking, counted, from point-to-point messages in a fixed order. */
/* data[n] becomes the rank-ordered sum over ranks, on every rank. */
void      dist_allreduce_sum(DistComm *c, float *data, size_t n);
/* shard[dist_shard_count(n, size, rank)] becomes this rank's shard of the rank-ordered sum of
 * every rank's in[n]. */
void      dist_reduce_scatter_sum(DistComm *c, const float *in, float *shard, size_t n);
/* out[n] on every rank is the concatenation of each rank's shard of n values (elem_bytes
 * each); shard may point into out. */
void      dist_allgather(DistComm *c, const void *shard, void *out, size_t n, size_t elem_bytes);
void      dist_broadcast(DistComm *c, void *buf, size_t bytes, int root);
/* The same two with blocks of any sizes: counts[k] values for rank k, the blocks end to end in
 * rank order (in[] and out[] hold sum(counts) values; shard holds counts[rank]). One message per
 * pair of ranks, whatever the blocks hold: ZeRO packs the shards of a unit's tensors into one
 * block (dist/zero.h). The even forms above are these with dist_shard_count's counts. */
void      dist_reduce_scatter_sum_v(DistComm *c, const float *in, float *shard,
                                    const size_t *counts);
/* The same with the pieces on the wire as w says (dist/wire.h): decoded before they are added,
 * this rank's own term rounded alike; the sum itself stays fp32. */
void      dist_reduce_scatter_sum_wire(DistComm *c, const float *in, float *shard,
                                       const size_t *counts, DistWire w);
void      dist_allgather_v(DistComm *c, const void *shard, void *out, const size_t *counts,
                           size_t elem_bytes);
/* A non-blocking all-reduce: the same rank-ordered sum and the same bytes as dist_allreduce_sum,
 * started now and finished later, so that it overlaps with computation. Start posts the
 * reduce-scatter's messages; test moves it on without waiting (once every piece of this rank's
 * shard has come, adds them in rank order and posts the all-gather) and returns true when data
 * holds the sum; wait finishes it. Every rank starts the same reductions with the same slots
 * (0 <= slot < DIST_IALLREDUCE_SLOTS; reductions in flight together use different slots), in
 * any order. data must not be touched until done. Scratch: (N-1) shards, category temp. */
enum { DIST_IALLREDUCE_SLOTS = 1000 };
typedef struct {
    DistComm    *c;
    float       *data;
    size_t       n;
    int          tag, phase;      /* phase 1: reduce-scatter in flight, 2: all-gather, 0: done */
    float       *pieces;          /* the other ranks' pieces of this rank's shard */
    DistRequest *reqs;
    int          n_reqs;
    DistWire     wire;
    const void **out;             /* [N]: the messages this rank sends, until they are gone */
    void        *codes;           /* what arrives encoded, until it is decoded */
} DistAllreduce;
void      dist_iallreduce_start(DistComm *c, DistAllreduce *h, float *data, size_t n, int slot);
/* The same on wire w: each term rounded as the wire rounds it, summed in fp32 in rank order, the
 * sum rounded again (its owner too), so every rank ends with the same bits. A world of one rank
 * rounds data in place once. */
void      dist_iallreduce_start_wire(DistComm *c, DistAllreduce *h, float *data, size_t n,
                                     int slot, DistWire w);
bool      dist_iallreduce_test(DistAllreduce *h);
void      dist_iallreduce_wait(DistAllreduce *h);

/* Small control values (a norm, a flag): the rank-ordered sum or the maximum over ranks. */
double    dist_sum_double(DistComm *c, double x);
double    dist_max_double(DistComm *c, double x);
/* True on every rank when ok is true on every rank: a collective check before work that would
 * otherwise leave the ranks that passed waiting for one that failed. */
bool      dist_all_ok(DistComm *c, bool ok);

/* A failure that the other ranks cannot be told about in order (they may be waiting in a
 * message): prints "PROGRAM: rank R: message" on stderr and ends every rank with exit code 1
 * through MPI_Abort. Before MPI is initialised it is a plain exit(1). */
_Noreturn void dist_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
