#ifndef TAPEGRAD_SCHEMA_H
#define TAPEGRAD_SCHEMA_H
/* A config struct's settings as one table, declared beside the struct: each row names a
 * setting, the field that holds it (by offsetof), its type, its range or the names of its
 * values, its default and help text, and whether a snapshot keeps it. Writing the kept rows
 * into a snapshot, reading them back with the same checks, checking a struct set by code and
 * filling the defaults all walk the same rows, so a setting is written down once:
 *
 *     static const SchemaRow ROWS[] = {
 *         { .key = "n_layer", .label = "n_layer (L)", .type = SCHEMA_INT,
 *           .offset = offsetof(GptConfig, n_layer), .lo = 1, .hi = GPT_MAX_LAYERS,
 *           .def = "4", .help = "transformer blocks", .kept = true },
 *     };
 *     const Schema GPT_SCHEMA = { "GptConfig", ROWS, 7 };
 *
 * A struct's keys in a snapshot are "<prefix>.<key>" when the caller gives a prefix (one
 * GptConfig is "model." in a training snapshot and "base." in a LoRA adapter), the key alone
 * otherwise. Values are text as a flag would take them: decimal integers, "%.17g" for a
 * double or a float (reads back identical), "true" / "false", an enum by its name.
 *
 * Reading never aborts: a key missing, malformed, out of range or against a row's own rule
 * fills a SnapshotError with "PATH: metadata 'KEY' ..." (the range written out), as
 * everywhere in autograd/snapshot.h. Where a file comes from an older layout, the caller reads
 * through a lookup that adds the values it lacked (optim/snapshot_keys.h's migration). */
#include <stdbool.h>
#include <stddef.h>

#include "autograd/snapshot.h"

typedef enum {
    SCHEMA_DOUBLE,      /* double, within [lo, hi] */
    SCHEMA_FLOAT,       /* float > 0, within [lo, hi]: a value no float holds exactly is
                         * refused (the file was not written by us) */
    SCHEMA_U64,         /* uint64_t, decimal, within [lo, hi] */
    SCHEMA_LONG,        /* long, decimal, within [lo, hi] and [0, LONG_MAX] */
    SCHEMA_INT,         /* int, decimal, within [lo, hi] and [0, INT_MAX] */
    SCHEMA_BOOL,        /* bool, "true" or "false" */
    SCHEMA_CHOICE,      /* an int-sized enum, by name(value) */
    SCHEMA_CUSTOM,      /* format and parse say how (a preset's name, a list of targets) */
    SCHEMA_STRING,      /* const char *, the text itself (a path); with name, one of the
                         * names (a task). NULL is written as "" (and a NULL def means the
                         * field's NULL: not given). The field is never a copy: it points to
                         * the text it was read from, or to the name's own text, so a value read
                         * from a snapshot lives as long as the reader (keep it open while the
                         * struct is used, as run/run.h's run_snapshot_settings does) */
    SCHEMA_BYTES,       /* size_t, a count of bytes in decimal, within [lo, hi] */
    SCHEMA_SUB,         /* a struct inside the struct, with a schema of its own (sub): its
                         * rows' keys are "<key>.<theirs>" (TrainerConfig's policy: the
                         * "precision." keys of PrecisionPolicy's schema) */
} SchemaType;

struct Schema;

/* How a number out of range is refused: "'KEY' = V is out of range [LO, HI]" (the default),
 * or, for a count such as a model's width, "'KEY' is V, not in LO..HI". */
typedef enum { SCHEMA_MSG_RANGE, SCHEMA_MSG_COUNT } SchemaMessage;

typedef struct SchemaRow {
    const char  *key;           /* the snapshot key, without the caller's prefix */
    const char  *label;         /* in messages that compare two structs ("n_embd (C)"); NULL:
                                 * the key */
    SchemaType   type;
    size_t       offset;        /* of the field in the struct */
    double       lo, hi;        /* a number's closed range; both 0: the type's */
    bool         zero_unset;    /* a 0 means "not set" and passes outside the range */
    SchemaMessage message;
    const char *(*name)(int i); /* CHOICE, STRING: the i-th name, NULL past the last */
    const char  *def;           /* the default as one would type it; NULL: none here */
    const char  *help;          /* one line for the settings table (docs, --help) */
    bool         kept;          /* a snapshot keeps it; a run-only setting has false */
    const char  *before;        /* the value a snapshot saved before the key existed had (NULL:
                                 * it was always written, or the migration that knows the
                                 * layout's history gives it: optim/snapshot_keys.c) */
    const char  *agrees;        /* the keys it must agree with, for the reader of the table
                                 * (the rule itself is check, or the struct's own check) */
    /* NULL: always; else whether the struct, as read so far, has the key (rows above only). */
    bool       (*applies)(const void *s);
    /* A rule beside the range (NULL: none): false with one sentence naming the key in why. */
    bool       (*check)(const struct SchemaRow *r, const void *s, char *why, size_t len);
    /* CUSTOM: the field as text, and text into the field (false with why: "not ..."), and
     * the bytes parse must set (tests/test_schema.c fills them with garbage first). */
    void       (*format)(const void *field, char *buf, size_t len);
    bool       (*parse)(const char *text, void *field, char *why, size_t len);
    size_t       size;
    const struct Schema *sub;   /* SUB: the inner struct's schema */
    /* SUB: only count of its rows from the one keyed first (NULL: its first row; count 0: to
     * its end), so that a struct's keys can sit apart in a file's order (an optimizer's weight
     * decay after every optimizer's moments, as the first layout wrote them). */
    const char  *first;
    int          count;
} SchemaRow;

typedef struct Schema {
    const char      *name;      /* the struct's: "GptConfig" */
    const SchemaRow *rows;
    int              n;
    /* Its kept rows are written by a program (cli/settings.h's settings_write, in
     * the order of the program's table), not by a library's snapshot code: SchedConfig's, which
     * a trainer does not hold. */
    bool             by_program;
} Schema;

/* The value of a key in a snapshot, or NULL: a reader's metadata (schema_reader_value, src a
 * SnapshotReader) or a view that adds what an older layout lacked. */
typedef const char *(*SchemaLookup)(const void *src, const char *key);
const char *schema_reader_value(const void *reader, const char *key);

/* "<prefix>.<key>" (prefix NULL: key) into buf; buf. */
const char *schema_key(const SchemaRow *r, const char *prefix, char *buf, size_t len);
/* The row of that key (without prefix; a SUB row's inner rows by "<key>.<theirs>"), or NULL. */
const SchemaRow *schema_find(const Schema *s, const char *key);
/* fn(row, its full key, the struct that holds its field, ctx) for every row but the SUB ones,
 * whose inner rows come in their place, in table order; stops at the first false (returned).
 * Whether a row applies is fn's to ask (row->applies(s)); a SUB row's applies is asked here. */
typedef bool (*SchemaLeafFn)(const SchemaRow *r, const char *key, const void *s, void *ctx);
bool schema_each(const Schema *sc, const char *prefix, const void *s, SchemaLeafFn fn,
                 void *ctx);
/* The field of row r in s as a snapshot keeps it. */
void schema_format(const SchemaRow *r, const void *s, char *buf, size_t len);

/* Every kept row that applies to s, written into w as "<prefix>.<key>" (the writer reports
 * the first failure, as snapshot_add_meta does); false when an add failed. */
bool schema_write(const Schema *sc, const char *prefix, const void *s, SnapshotWriter *w,
                  SnapshotError *err);
/* Every kept row that applies, read through lookup into s with its checks, in table order (a
 * key the file lacks is the row's before, when it has one: the migration of a key added
 * later is that one field); false with "PATH: metadata 'KEY' ..." in err at the first key
 * missing, malformed, out of range or against its rule. Fields of rows not read are left as
 * s had them. */
bool schema_read(const Schema *sc, const char *prefix, SchemaLookup lookup, const void *src,
                 const char *path, void *s, SnapshotError *err);
/* The same checks on a struct set by code: false with "'KEY' = VALUE ..." in why. */
bool schema_check(const Schema *sc, const char *prefix, const void *s, char *why, size_t len);
/* The first kept row that applies to a in which a and b differ, as a snapshot keeps them;
 * NULL when they agree on every one. */
const SchemaRow *schema_differs(const Schema *sc, const void *a, const void *b);
/* text, as a snapshot keeps it (or as the row's default is written), into row r's field of s,
 * with the row's checks: false with one sentence naming the row's key in why. */
bool schema_parse(const SchemaRow *r, const char *text, void *s, char *why, size_t len);
#endif
