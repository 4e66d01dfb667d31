/* The communicator (dist/comm.h): MPI point-to-point calls with their bytes counted, and the
 * collectives built from them in a fixed order. */
#include "dist/comm.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/mem.h"
#include "dist/wire.h"

static DistComm world;
static char     program[64] = "tapegrad";

void dist_init(int *argc, char ***argv)
{
    if (argc && argv && *argc > 0) {
        const char *slash = strrchr((*argv)[0], '/');
        snprintf(program, sizeof program, "%s", slash ? slash + 1 : (*argv)[0]);
    }
    if (dist_initialized())     /* a program may start MPI early (train_gpt) and a layer again */
        return;
    int provided;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    world.comm = MPI_COMM_WORLD;
    MPI_Comm_rank(MPI_COMM_WORLD, &world.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world.size);
    dist_reset_counts(&world);
}

void dist_finalize(void)
{
    if (dist_initialized())
        MPI_Finalize();
}

bool dist_initialized(void)
{
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    return init && !fin;
}

DistComm *dist_world(void)
{
    if (!dist_initialized())
        dist_fail("dist_world called before dist_init");
    return &world;
}

DistComm *dist_split(DistComm *parent, int color, int key)
{
    MPI_Comm sub;
    MPI_Comm_split(parent->comm, color < 0 ? MPI_UNDEFINED : color, key, &sub);
    if (sub == MPI_COMM_NULL)
        return NULL;
    DistComm *c = calloc(1, sizeof *c);
    if (!c)
        dist_fail("out of memory for a communicator");
    c->comm = sub;
    MPI_Comm_rank(sub, &c->rank);
    MPI_Comm_size(sub, &c->size);
    return c;
}

void dist_comm_free(DistComm *c)
{
    if (!c || c == &world)
        return;
    MPI_Comm_free(&c->comm);
    free(c);
}

void dist_reset_counts(DistComm *c)
{
    c->bytes_sent = c->bytes_recv = c->messages_sent = 0;
}

size_t dist_shard_begin(size_t n, int size, int rank)
{
    size_t base = n / (size_t)size, extra = n % (size_t)size, r = (size_t)rank;
    return r * base + (r < extra ? r : extra);
}

size_t dist_shard_count(size_t n, int size, int rank)
{
    return dist_shard_begin(n, size, rank + 1) - dist_shard_begin(n, size, rank);
}

/* MPI counts are int: a larger message is a programming error at this project's sizes. */
static int byte_count(size_t bytes)
{
    if (bytes > (size_t)INT_MAX)
        dist_fail("a message of %zu bytes exceeds MPI's int count", bytes);
    return (int)bytes;
}

void dist_send(DistComm *c, const void *buf, size_t bytes, int dest, int tag)
{
    MPI_Send(buf, byte_count(bytes), MPI_BYTE, dest, tag, c->comm);
    c->bytes_sent += bytes;
    c->messages_sent++;
}

void dist_recv(DistComm *c, void *buf, size_t bytes, int src, int tag)
{
    MPI_Recv(buf, byte_count(bytes), MPI_BYTE, src, tag, c->comm, MPI_STATUS_IGNORE);
    c->bytes_recv += bytes;
}

/* A non-blocking message is counted when it is posted: the bytes are committed to the wire
 * then, whenever MPI actually moves them. */
DistRequest dist_isend(DistComm *c, const void *buf, size_t bytes, int dest, int tag)
{
    DistRequest r;
    MPI_Isend(buf, byte_count(bytes), MPI_BYTE, dest, tag, c->comm, &r.req);
    c->bytes_sent += bytes;
    c->messages_sent++;
    return r;
}

DistRequest dist_irecv(DistComm *c, void *buf, size_t bytes, int src, int tag)
{
    DistRequest r;
    MPI_Irecv(buf, byte_count(bytes), MPI_BYTE, src, tag, c->comm, &r.req);
    c->bytes_recv += bytes;
    return r;
}

void dist_wait(DistRequest *r)
{
    MPI_Wait(&r->req, MPI_STATUS_IGNORE);
}

bool dist_test(DistRequest *r)
{
    int done = 0;
    MPI_Test(&r->req, &done, MPI_STATUS_IGNORE);
    return done != 0;
}

/* Where block k starts when blocks of counts[0..] lie end to end. */
static size_t block_begin(const size_t *counts, int k)
{
    size_t b = 0;
    for (int j = 0; j < k; j++)
        b += counts[j];
    return b;
}

/* This rank's message of a wire: the piece itself when the wire is fp32 (sent from where it
 * lies), else its encoding in a buffer of its own (category temp, freed by wire_done). */
static const void *wire_message(DistWire w, const float *x, size_t n)
{
    if (w == DIST_WIRE_FP32)
        return x;
    void *msg = mem_alloc(MEM_TEMP, dist_wire_bytes(w, n ? n : 1));
    dist_wire_encode(w, x, n, msg);
    return msg;
}

static void wire_done(DistWire w, const void *msg)
{
    if (w != DIST_WIRE_FP32)
        mem_free((void *)msg);
}

/* Reduce-scatter by direct exchange: every rank posts its piece of shard k to rank k, then
 * receives the pieces of its own shard one rank at a time, in rank order, adding each as it
 * comes: ((x_0 + x_1) + x_2) + ... Each rank sends n (N-1)/N values, the same volume as a ring,
 * and needs one shard of scratch (temp) instead of N. Under a wire other than fp32 the pieces
 * travel encoded and are decoded before they are added, and this rank's own piece is rounded as
 * the wire rounds the others' (dist/wire.h). */
void dist_reduce_scatter_sum_wire(DistComm *c, const float *in, float *shard,
                                  const size_t *counts, DistWire w)
{
    /* BEGIN SOLUTION allreduce */
    int N = c->size, me = c->rank;
    size_t mine = counts[me];
    DistRequest *sends = malloc(sizeof *sends * (size_t)N);
    const void **out = malloc(sizeof *out * (size_t)N);
    float *piece = mine ? mem_alloc(MEM_TEMP, mine * sizeof *piece) : NULL;
    void *msg = mine && w != DIST_WIRE_FP32 ? mem_alloc(MEM_TEMP, dist_wire_bytes(w, mine)) : NULL;
    if (!sends || !out)
        dist_fail("out of memory in reduce-scatter");
    for (int k = 0; k < N; k++) {
        if (k == me)
            continue;
        out[k] = wire_message(w, in + block_begin(counts, k), counts[k]);
        sends[k] = dist_isend(c, out[k], dist_wire_bytes(w, counts[k]), k, DIST_TAG_COLLECTIVE);
    }
    const float *own = in + block_begin(counts, me);
    for (int j = 0; j < N; j++) {
        const float *x = piece;
        if (j != me && w == DIST_WIRE_FP32) {
            dist_recv(c, piece, mine * sizeof *piece, j, DIST_TAG_COLLECTIVE);
        } else if (j != me) {
            dist_recv(c, msg, dist_wire_bytes(w, mine), j, DIST_TAG_COLLECTIVE);
            dist_wire_decode(w, msg, mine, piece);
        } else if (w == DIST_WIRE_FP32) {
            x = own;
        } else if (mine) {
            dist_wire_round(w, own, piece, mine);
        }
        if (j == 0 && mine)         /* an empty block may have no buffers at all */
            memcpy(shard, x, mine * sizeof *shard);
        else if (j > 0)
            for (size_t i = 0; i < mine; i++)
                shard[i] += x[i];
    }
    for (int k = 0; k < N; k++) {
        if (k == me)
            continue;
        dist_wait(&sends[k]);
        wire_done(w, out[k]);
    }
    mem_free(msg);
    mem_free(piece);
    free(out);
    free(sends);
    /* STUDENT
    (void)c, (void)in, (void)shard, (void)counts, (void)w, (void)block_begin;
    (void)wire_message, (void)wire_done;
    */
    /* END SOLUTION allreduce */
}

void dist_reduce_scatter_sum_v(DistComm *c, const float *in, float *shard, const size_t *counts)
{
    dist_reduce_scatter_sum_wire(c, in, shard, counts, DIST_WIRE_FP32);
}

/* All-gather by direct exchange: every rank posts its shard to every other rank and receives
 * theirs into their places in out (shard may already lie at its own place, or anywhere else). */
void dist_allgather_v(DistComm *c, const void *shard, void *out, const size_t *counts,
                      size_t elem_bytes)
{
    /* BEGIN SOLUTION allreduce */
    int N = c->size, me = c->rank;
    char *o = out;
    DistRequest *reqs = malloc(sizeof *reqs * 2 * (size_t)N);
    if (!reqs)
        dist_fail("out of memory in all-gather");
    size_t my_bytes = counts[me] * elem_bytes;
    char *my_place = o + block_begin(counts, me) * elem_bytes;
    int nr = 0;
    for (int k = 0; k < N; k++) {
        if (k == me)
            continue;
        reqs[nr++] = dist_irecv(c, o + block_begin(counts, k) * elem_bytes,
                                counts[k] * elem_bytes, k, DIST_TAG_COLLECTIVE + 1);
        reqs[nr++] = dist_isend(c, shard, my_bytes, k, DIST_TAG_COLLECTIVE + 1);
    }
    if (my_bytes && shard != my_place)
        memmove(my_place, shard, my_bytes);
    for (int i = 0; i < nr; i++)
        dist_wait(&reqs[i]);
    free(reqs);
    /* STUDENT
    (void)c, (void)shard, (void)out, (void)counts, (void)elem_bytes;
    */
    /* END SOLUTION allreduce */
}

/* The even split of n values, as counts for the _v forms. */
static size_t *even_counts(int N, size_t n)
{
    size_t *counts = malloc(sizeof *counts * (size_t)N);
    if (!counts)
        dist_fail("out of memory in a collective");
    for (int k = 0; k < N; k++)
        counts[k] = dist_shard_count(n, N, k);
    return counts;
}

void dist_reduce_scatter_sum(DistComm *c, const float *in, float *shard, size_t n)
{
    size_t *counts = even_counts(c->size, n);
    dist_reduce_scatter_sum_v(c, in, shard, counts);
    free(counts);
}

void dist_allgather(DistComm *c, const void *shard, void *out, size_t n, size_t elem_bytes)
{
    size_t *counts = even_counts(c->size, n);
    dist_allgather_v(c, shard, out, counts, elem_bytes);
    free(counts);
}

void dist_allreduce_sum(DistComm *c, float *data, size_t n)
{
    if (c->size == 1)
        return;
    /* BEGIN SOLUTION allreduce */
    size_t begin = dist_shard_begin(n, c->size, c->rank);
    size_t count = dist_shard_count(n, c->size, c->rank);
    float *shard = count ? mem_alloc(MEM_TEMP, count * sizeof *shard) : NULL;
    dist_reduce_scatter_sum(c, data, shard, n);
    if (count)
        memcpy(data + begin, shard, count * sizeof *shard);
    mem_free(shard);
    dist_allgather(c, data + begin, data, n, sizeof *data);
    /* STUDENT
    (void)data, (void)n;
    */
    /* END SOLUTION allreduce */
}

/* Phase 1: every other rank's piece of my shard arrives into pieces (rank k's at position k,
 * counting without me); my pieces of their shards leave from data. Phase 2 starts when all of
 * them are done: my shard becomes ((x_0 + x_1) + x_2) + ..., as in dist_reduce_scatter_sum, and
 * goes to every rank while theirs come in. Under a wire other than fp32 the pieces travel
 * encoded (each rank's own term rounded alike), and so does the sum, which its owner rounds too:
 * every rank then holds the same bits. */
void dist_iallreduce_start_wire(DistComm *c, DistAllreduce *h, float *data, size_t n, int slot,
                                DistWire w)
{
    /* BEGIN SOLUTION allreduce */
    if (slot < 0 || slot >= DIST_IALLREDUCE_SLOTS)
        dist_fail("all-reduce slot %d out of range", slot);
    int N = c->size, me = c->rank;
    size_t mine = dist_shard_count(n, N, me), wire_mine = dist_wire_bytes(w, mine);
    *h = (DistAllreduce){ .c = c, .data = data, .n = n, .tag = DIST_TAG_COLLECTIVE + 16 + 2 * slot,
                          .phase = 1, .wire = w };
    if (N == 1) {               /* no message, but the term rounded as the wire would */
        dist_wire_round(w, data, data, n);
        h->phase = 0;
        return;
    }
    h->reqs = malloc(sizeof *h->reqs * 2 * (size_t)N);
    h->out = calloc((size_t)N, sizeof *h->out);
    if (!h->reqs || !h->out)
        dist_fail("out of memory in all-reduce");
    if (mine)
        h->pieces = mem_alloc(MEM_TEMP, (size_t)(N - 1) * mine * sizeof *h->pieces);
    if (mine && w != DIST_WIRE_FP32)
        h->codes = mem_alloc(MEM_TEMP, (size_t)(N - 1) * wire_mine);
    for (int k = 0, j = -1; k < N; k++) {
        if (k == me)
            continue;
        j++;                    /* k's place among the others */
        void *into = w == DIST_WIRE_FP32 ? (void *)(h->pieces + (size_t)j * mine)
                                          : (void *)((char *)h->codes + (size_t)j * wire_mine);
        h->reqs[h->n_reqs++] = dist_irecv(c, into, wire_mine, k, h->tag);
        size_t count = dist_shard_count(n, N, k);
        h->out[k] = wire_message(w, data + dist_shard_begin(n, N, k), count);
        h->reqs[h->n_reqs++] = dist_isend(c, h->out[k], dist_wire_bytes(w, count), k, h->tag);
    }
    /* STUDENT
    (void)slot, (void)w;
    *h = (DistAllreduce){ .c = c, .data = data, .n = n };
    */
    /* END SOLUTION allreduce */
}

void dist_iallreduce_start(DistComm *c, DistAllreduce *h, float *data, size_t n, int slot)
{
    dist_iallreduce_start_wire(c, h, data, n, slot, DIST_WIRE_FP32);
}

static bool all_done(DistAllreduce *h)
{
    int done = 0;
    MPI_Testall(h->n_reqs, (MPI_Request *)h->reqs, &done, MPI_STATUSES_IGNORE);
    return done != 0;
}

/* The phase's messages are out: their encodings can go. */
static void free_messages(DistAllreduce *h)
{
    for (int k = 0; k < h->c->size; k++) {
        if (h->out[k])
            wire_done(h->wire, h->out[k]);
        h->out[k] = NULL;
    }
}

/* Where rank k's shard of the sum arrives in phase 2: in place in data (fp32), or its codes in
 * h->codes, end to end in rank order (without mine). */
static size_t gathered_at(const DistAllreduce *h, int k)
{
    size_t at = 0;
    for (int j = 0; j < k; j++)
        if (j != h->c->rank)
            at += dist_wire_bytes(h->wire, dist_shard_count(h->n, h->c->size, j));
    return at;
}

static void sum_and_gather(DistAllreduce *h)
{
    /* BEGIN SOLUTION allreduce */
    DistComm *c = h->c;
    int N = c->size, me = c->rank;
    DistWire w = h->wire;
    size_t mine = dist_shard_count(h->n, N, me), begin = dist_shard_begin(h->n, N, me);
    float *own = h->data + begin;
    free_messages(h);
    if (w != DIST_WIRE_FP32 && mine) {
        for (int j = 0; j < N - 1; j++)
            dist_wire_decode(w, (char *)h->codes + (size_t)j * dist_wire_bytes(w, mine), mine,
                             h->pieces + (size_t)j * mine);
        dist_wire_round(w, own, own, mine);
    }
    mem_free(h->codes);
    h->codes = NULL;
    /* x_j is rank j's piece: mine in place, the others' at their position in pieces. */
    float *acc = me == 0 ? own : h->pieces;
    for (int j = 1; j < N; j++) {
        const float *x = j == me ? own : h->pieces + (size_t)(j - (j > me)) * mine;
        for (size_t i = 0; i < mine; i++)
            acc[i] += x[i];
    }
    if (acc != own && mine)
        memcpy(own, acc, mine * sizeof *own);
    mem_free(h->pieces);
    h->pieces = NULL;
    h->n_reqs = 0;
    const void *msg = wire_message(w, own, mine);
    if (w != DIST_WIRE_FP32) {
        dist_wire_decode(w, msg, mine, own);    /* the owner holds what the others receive */
        h->codes = mem_alloc(MEM_TEMP, gathered_at(h, N) + 1);
    }
    h->out[me] = (void *)msg;
    for (int k = 0; k < N; k++) {
        if (k == me)
            continue;
        size_t count = dist_shard_count(h->n, N, k);
        void *into = w == DIST_WIRE_FP32 ? (void *)(h->data + dist_shard_begin(h->n, N, k))
                                          : (void *)((char *)h->codes + gathered_at(h, k));
        h->reqs[h->n_reqs++] = dist_irecv(c, into, dist_wire_bytes(w, count), k, h->tag + 1);
        h->reqs[h->n_reqs++] = dist_isend(c, msg, dist_wire_bytes(w, mine), k, h->tag + 1);
    }
    h->phase = 2;
    /* STUDENT
    (void)h, (void)free_messages, (void)gathered_at;
    */
    /* END SOLUTION allreduce */
}

/* Phase 2 is done: the other shards' codes decoded into their places. */
static void finish_gather(DistAllreduce *h)
{
    int N = h->c->size, me = h->c->rank;
    if (h->wire != DIST_WIRE_FP32)
        for (int k = 0; k < N; k++)
            if (k != me)
                dist_wire_decode(h->wire, (char *)h->codes + gathered_at(h, k),
                                 dist_shard_count(h->n, N, k),
                                 h->data + dist_shard_begin(h->n, N, k));
    if (h->out && h->out[me])
        wire_done(h->wire, h->out[me]);
    mem_free(h->codes);
    h->codes = NULL;
    free(h->out);
    h->out = NULL;
    free(h->reqs);
    h->reqs = NULL;
    h->phase = 0;
}

bool dist_iallreduce_test(DistAllreduce *h)
{
    if (h->phase == 1 && all_done(h))
        sum_and_gather(h);
    if (h->phase == 2 && all_done(h))
        finish_gather(h);
    return h->phase == 0;
}

void dist_iallreduce_wait(DistAllreduce *h)
{
    if (h->phase == 1) {
        MPI_Waitall(h->n_reqs, (MPI_Request *)h->reqs, MPI_STATUSES_IGNORE);
        sum_and_gather(h);
    }
    if (h->phase == 2) {
        MPI_Waitall(h->n_reqs, (MPI_Request *)h->reqs, MPI_STATUSES_IGNORE);
        finish_gather(h);
    }
}

/* Root sends to each other rank in turn: (N-1) b bytes from the root, b into each other rank. */
void dist_broadcast(DistComm *c, void *buf, size_t bytes, int root)
{
    if (c->rank == root) {
        for (int k = 0; k < c->size; k++)
            if (k != root)
                dist_send(c, buf, bytes, k, DIST_TAG_COLLECTIVE + 2);
    } else {
        dist_recv(c, buf, bytes, root, DIST_TAG_COLLECTIVE + 2);
    }
}

/* Every rank gathers every value and combines them in rank order, so all agree to the bit. */
static void gather_doubles(DistComm *c, double x, double *all)
{
    all[c->rank] = x;
    dist_allgather(c, &all[c->rank], all, (size_t)c->size, sizeof x);
}

double dist_sum_double(DistComm *c, double x)
{
    double all[c->size], s = 0;
    gather_doubles(c, x, all);
    for (int k = 0; k < c->size; k++)
        s += all[k];
    return s;
}

double dist_max_double(DistComm *c, double x)
{
    double all[c->size];
    gather_doubles(c, x, all);
    double m = all[0];
    for (int k = 1; k < c->size; k++)
        m = all[k] > m ? all[k] : m;
    return m;
}

bool dist_all_ok(DistComm *c, bool ok)
{
    return dist_max_double(c, ok ? 0.0 : 1.0) == 0.0;
}

_Noreturn void dist_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (dist_initialized())
        fprintf(stderr, "%s: rank %d: ", program, world.rank);
    else
        fprintf(stderr, "%s: ", program);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(stderr);
    if (dist_initialized())
        MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}
