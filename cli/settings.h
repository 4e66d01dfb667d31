#ifndef TAPEGRAD_SETTINGS_H
#define TAPEGRAD_SETTINGS_H
/* A program's settings as one table: each row says a flag's name, the field of the program's
 * options struct it sets (by offsetof), its type and range or choices, its default, its help
 * lines, the snapshot key that keeps it and whether a resumed run may change it. The getopt
 * list, --help, parsing with range checks, writing the keys into a snapshot, reading them back
 * with the same checks (the key named in the error) and the merge rule all come from it, so a
 * new flag is one row (and its field).
 *
 *     static const Setting SETTINGS[] = {
 *         { .heading = "Run:" },
 *         { .name = "steps", .id = FLAG_STEPS, .type = SETTING_LONG,
 *           .offset = offsetof(Options, steps), .lo = 0, .hi = 1e9, .def = "2000",
 *           .arg = "N", .help = "train until step N", .key = "train.step" },
 *     };
 *
 * Errors: a bad flag is a usage error (exit 2) naming the flag, a bad snapshot value exits 1
 * naming the file, the key and the flag's range. */
#include <stdbool.h>
#include <stddef.h>

#include "autograd/schema.h"

typedef enum {
    SETTING_INT,        /* int field, a whole number in [lo, hi] */
    SETTING_LONG,       /* long field, the same */
    SETTING_DOUBLE,     /* double field, a number in [lo, hi] */
    SETTING_FLOAT,      /* float field, the same, rounded to float once in range (a library's
                         * config that keeps a float, LoraConfig's alpha) */
    SETTING_BYTES,      /* size_t field, a size in [lo, hi] (cli_bytes: "64MiB") */
    SETTING_SWITCH,     /* bool field; the flag takes no value: given means true */
    SETTING_CHOICE,     /* int-sized enum field: the index of the value in choices */
    SETTING_STRING,     /* const char * field: the value itself (a path, a name) */
    SETTING_FOLDER,     /* const char * field: a folder's name, refused when empty (cli_folder:
                         * files would go into /); a program's --out DIR or --work DIR */
    SETTING_CUSTOM,     /* set() reads the value into the field(s); offset unused */
} SettingType;

/* What a resumed run (a loaded snapshot) does with a setting that has a key (one without is
 * never kept): kept unless the row says otherwise. */
typedef enum {
    SETTING_KEPT,       /* kept: the snapshot's value is the run's; a flag given must agree */
    SETTING_ONWARD,     /* kept, but a flag given may go past it (--steps extends a run) */
    SETTING_FREE,       /* not kept: the flag, or its default, applies to the resumed run */
} SettingMerge;

/* A condition a flag needs, shared by the rows it applies to: given without it, a flag is a
 * usage error (settings_check_needs). The message is printed from refusal as a format given the
 * flag's name and then the value of the setting value_id (as a snapshot stores it; "" for 0):
 * "--%s applies to --optimizer sgd, not %s". */
typedef struct {
    bool      (*holds)(const void *opts);
    const char *refusal;
    int         value_id;
    bool        early;          /* checked by settings_check_needs(..., true), the others by false
                                 * (a program that reads a snapshot's settings in between) */
} SettingNeed;

typedef struct {
    const char *heading;        /* a line of --help between groups; the rest of the row unused */
    const char *name;           /* the long flag, without its dashes */
    int         id;             /* the option parser returns it for the flag (the program's flag enum) */
    SettingType type;
    size_t      offset;         /* offsetof(the program's options, the field) */
    double      lo, hi;         /* the range of a number, the same for the key */
    bool        zero_unset;     /* a saved 0 means "not given" (the flag itself takes lo..hi) */
    const char *const *choices; /* CHOICE: the names, NULL-terminated; NULL with a schema
                                 * row that has names (its name(i)): the schema's, so the
                                 * list is written once, beside its struct. STRING: the same,
                                 * or a free text (a path) when neither has names */
    const char *def;            /* the default as one would type it; NULL: the field's zero */
    const char *arg;            /* the value's name in --help ("N", "FILE"); NULL for a switch */
    const char *help;           /* --help lines, '\n' between them; "(default DEF)" is added */
    const char *key;            /* the snapshot metadata key; NULL: not in a snapshot */
    bool        library_key;    /* the key is written by a library's snapshot, not settings_write
                                 * (always so for a row with a range); a switch's is "true" or
                                 * "false" there ("1" or "0" otherwise) */
    bool        negated;        /* SWITCH: the flag clears the field (--untied: model.tied) */
    const char *before;         /* the value of a run saved before the key existed (NULL: the key
                                 * was always written) */
    const SettingNeed *needs[2];    /* what the flag needs to be given (NULL: nothing) */
    SettingMerge merge;
    /* A setting that is a library's: the schema that declares it (autograd/schema.h:
     * TRAINER_SCHEMA, GPT_SCHEMA, ...), whose row of key gives the range instead of lo and hi,
     * and the help when the row here has none; the library writes the key (library_key).
     * The default stays the program's (train_gpt's demo model is not the library's). key is
     * the snapshot's ("model.n_layer": a prefix before the first dot that the schema's keys
     * lack is the caller's, as GptConfig's "model."). A run-only row of the schema (kept
     * false: RUN_LOCAL_SCHEMA's "threads") is named by its key the same way, but then the
     * setting has no snapshot key (settings_key is NULL): it is neither written nor merged. */
    const Schema *schema;
    /* CUSTOM: sets the field(s) from the flag's text, a usage error naming flag otherwise. A
     * custom setting without arg takes no value (text is NULL). A kept custom setting is read
     * back from a snapshot by set too, from the text format gives (its value as the flag
     * would be typed: "delayed:16"), which is also what settings_merge compares. */
    void (*set)(void *opts, int id, const char *flag, const char *text);
    void (*format)(const void *opts, int id, char *buf, size_t len);
    /* Whether the key holds this flag's value in a snapshot made with these options (NULL:
     * always); a key that does not apply is neither written nor merged. */
    bool (*applies)(const void *opts);
    /* A check of the value with the others once the flag has set it (a usage error
     * "--flag value: why" otherwise), for what a range cannot say. */
    bool (*check)(const void *opts, char *why, size_t len);
} Setting;

/* Every row with a default sets its field from it (as a flag would, not marked given). */
void settings_defaults(const Setting *t, int n, void *opts);
/* --help's lines for the rows t[0..n-1]. */
void settings_usage(const Setting *t, int n);
/* The command line into opts; given[id - first_id] marks each flag seen (given may be NULL for
 * a program that does not ask). -h and --help call
 * usage() and exit 0. Anything else not in the table is a usage error. --settings-table alone
 * prints the table (each flag's key, schema, range, default, writer, merge rule) as a TSV and
 * exits 0: tests/test_schema.c compares it with the library's schemas. */
void settings_parse(const Setting *t, int n, void *opts, bool *given, int first_id,
                    void (*usage)(void), int argc, char **argv);
/* Each flag given (given[id - first_id]) whose needs with this early do not hold: a usage error
 * from the need's refusal. Rows in table order, a row's needs in order. */
void settings_check_needs(const Setting *t, int n, const void *opts, const bool *given,
                          int first_id, bool early);
/* The row of flag id, or NULL. */
const Setting *settings_find(const Setting *t, int n, int id);

/* The row's snapshot key (NULL: none, or a run-only schema row's), and the value of its field
 * as a snapshot stores it ("%.17g" for a double). */
const char *settings_key(const Setting *s);
void settings_format(const Setting *s, const void *opts, char *buf, size_t len);

/* The metadata a program adds to a snapshot: keys[i] = values[i], i < n, as a snapshot writer
 * takes them (optim/train_snapshot.h). A key must outlive the list (the table's, a literal). */
enum { SETTINGS_META_MAX = 32, SETTINGS_META_VALUE = 4096 };
typedef struct {
    int         n;
    const char *keys[SETTINGS_META_MAX];
    const char *values[SETTINGS_META_MAX];      /* into text */
    char        text[SETTINGS_META_MAX][SETTINGS_META_VALUE];
} SettingsMeta;

/* Writing: adds every row with a key that applies to opts, after what m holds already. */
void settings_write(const Setting *t, int n, const void *opts, SettingsMeta *m);
/* One pair of the program's own. */
void settings_meta_put(SettingsMeta *m, const char *key, const char *value);
/* Every kept row of a flat schema (no SUB rows: its keys are whole) that applies to s, in
 * table order, as a snapshot keeps it (a record a program writes: run/run.h's RunRecord). */
void settings_meta_put_schema(SettingsMeta *m, const Schema *sc, const void *s);

/* The merge rule for one kept row: saved (a snapshot's value, text) is read with the flag's
 * checks (exit 1 naming path and key otherwise), compared with the flag when given (a usage
 * error naming the flag, both values and path when they differ), then becomes the field's. */
void settings_merge(const Setting *s, void *opts, bool given, const char *saved,
                    const char *path);

/* A snapshot's settings as a resumed run reads them: value(source, key) is the key's text
 * (NULL when the file lacks it), theirs the program's options as the library read the
 * snapshot's config into them (a custom row's saved value is its format of theirs), maker
 * the program that writes such files (named when a key is missing). */
typedef struct {
    const char  *path;
    const char  *maker;
    const char *(*value)(const void *source, const char *key);
    const void  *source;
    const void  *theirs;
} SettingsSaved;

/* The key's value, or before when the file lacks it (a key added since); exit 1 naming the
 * file and the key when it has neither. */
const char *settings_saved_value(const SettingsSaved *saved, const char *key, const char *before);
/* Every kept row (a key, not SETTING_FREE, that applies to opts) in table order through
 * settings_merge: the snapshot's value becomes the run's, a flag given (given[id - first_id])
 * must agree. */
void settings_merge_all(const Setting *t, int n, void *opts, const bool *given, int first_id,
                        const SettingsSaved *saved);

/* --kernels, in every program that trains: a CUSTOM row whose set is settings_set_kernels and
 * whose help is SETTINGS_KERNELS_HELP, without a default (unset, TAPEGRAD_KERNELS decides):
 *     { .name = "kernels", .id = FLAG_KERNELS, .type = SETTING_CUSTOM,
 *       .set = settings_set_kernels, .arg = "K", .help = SETTINGS_KERNELS_HELP },
 * It chooses the kernel mode of autograd/kernels.h for the whole process at once. */
void settings_set_kernels(void *opts, int id, const char *flag, const char *text);
#define SETTINGS_KERNELS_HELP                                                                  \
    "the products: fast (the best library for this CPU; the last\n"                          \
    "bits depend on the CPU) or portable (tapegrad's own: the same\n"                       \
    "bits on every CPU and thread count, slower) (default: the\n"                          \
    "environment's TAPEGRAD_KERNELS, else fast)"

#endif
