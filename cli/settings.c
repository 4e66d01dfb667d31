#include "cli/settings.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/kernels.h"
#include "cli/cli.h"

enum { HELP_COLUMN = 22, HELP_WIDTH = 100, MAX_SETTINGS = 128 };

/* The library's row of a setting that has a schema: the row of its key, or of the key without
 * its first part (the caller's prefix, "model."). */
static const SchemaRow *row(const Setting *s)
{
    if (!s->schema)
        return NULL;
    const SchemaRow *r = schema_find(s->schema, s->key);
    const char *dot = strchr(s->key, '.');
    if (!r && dot)
        r = schema_find(s->schema, dot + 1);
    if (!r)     /* a program's own mistake, found at its first run */
        cli_die(1, "--%s: %s has no setting '%s'", s->name, s->schema->name, s->key);
    return r;
}
static double lo(const Setting *s) { return s->schema ? row(s)->lo : s->lo; }
static double hi(const Setting *s) { return s->schema ? row(s)->hi : s->hi; }
/* The default is always the program's own (train_gpt's demo model is not the library's). */
static const char *def(const Setting *s) { return s->def; }
static const char *help(const Setting *s) { return s->help || !s->schema ? s->help : row(s)->help; }
static bool zero_unset(const Setting *s)
{
    return s->zero_unset || (s->schema && row(s)->zero_unset);
}
static const char *before(const Setting *s)
{
    return s->before || !s->schema ? s->before : row(s)->before;
}
/* A row that references a run-only schema row (kept false) names it by key, but no snapshot
 * holds it: it has no snapshot key. */
const char *settings_key(const Setting *s)
{
    return s->key && (!s->schema || row(s)->kept) ? s->key : NULL;
}
/* A library's key is written by its snapshot code, unless its schema is written by programs. */
static bool library_key(const Setting *s)
{
    return s->library_key || (s->schema && !s->schema->by_program);
}

/* A choice's or a named string's names, NULL-terminated, into names[0..max-1]: the row's own
 * choices, or else its schema row's name(i) (written once, beside the struct: RunKept's
 * attention), so that a program does not keep a second copy of the list. NULL for a string
 * without names (a path). */
enum { MAX_NAMES = 32 };
static const char *const *choices(const Setting *s, const char **names)
{
    bool named = s->type == SETTING_CHOICE || s->type == SETTING_STRING;
    if (s->choices || !named || !s->schema || !row(s)->name)
        return s->choices;
    const SchemaRow *r = row(s);
    int n = 0;
    while (n < MAX_NAMES - 1 && r->name(n))
        n++;
    if (r->name(n))     /* a program's own mistake, found at its first run */
        cli_die(1, "--%s: %s's '%s' has more than %d names", s->name, s->schema->name, s->key,
                MAX_NAMES - 1);
    for (int i = 0; i < n; i++)
        names[i] = r->name(i);
    names[n] = NULL;
    return names;
}

static void *field(const Setting *s, void *opts) { return (char *)opts + s->offset; }
static const void *cfield(const Setting *s, const void *opts)
{
    return (const char *)opts + s->offset;
}

/* Setting from text --------------------------------------------------------------------------- */

/* The value of a flag (flag is "--name"): a usage error naming it when it is not in range. */
static void set_from_flag(const Setting *s, void *opts, const char *flag, const char *text)
{
    void *f = field(s, opts);
    const char *buf[MAX_NAMES], *const *names = choices(s, buf);
    switch (s->type) {
    case SETTING_INT: *(int *)f = (int)cli_long(flag, text, (long)lo(s), (long)hi(s)); break;
    case SETTING_LONG: *(long *)f = cli_long(flag, text, (long)lo(s), (long)hi(s)); break;
    case SETTING_DOUBLE: *(double *)f = cli_double(flag, text, lo(s), hi(s)); break;
    case SETTING_FLOAT: *(float *)f = (float)cli_double(flag, text, lo(s), hi(s)); break;
    case SETTING_BYTES:
        *(size_t *)f = cli_bytes(flag, text, (size_t)lo(s), (size_t)hi(s));
        break;
    case SETTING_SWITCH: *(bool *)f = !s->negated; break;
    case SETTING_CHOICE: *(int *)f = cli_choice(flag, text, names); break;
    case SETTING_STRING:     /* one of the choices when there are */
        *(const char **)f = names ? names[cli_choice(flag, text, names)] : text;
        break;
    case SETTING_FOLDER: *(const char **)f = cli_folder(flag, text); break;
    case SETTING_CUSTOM: s->set(opts, s->id, flag, text); break;
    }
}

void settings_defaults(const Setting *t, int n, void *opts)
{
    char flag[64];
    for (int i = 0; i < n; i++)
        if (t[i].name && def(&t[i])) {
            snprintf(flag, sizeof flag, "--%s", t[i].name);
            set_from_flag(&t[i], opts, flag, def(&t[i]));
        }
}

/* The value of a snapshot key, with the flag's checks: exit 1 naming the file and the key. */
static void set_from_key(const Setting *s, void *opts, const char *text, const char *path)
{
    void *f = field(s, opts);
    const char *key = settings_key(s);
    const char *buf[MAX_NAMES], *const *names = choices(s, buf);
    char *end;
    double x;
    switch (s->type) {
    case SETTING_INT: case SETTING_LONG: case SETTING_DOUBLE: case SETTING_FLOAT:
    case SETTING_BYTES: {
        bool integer = s->type != SETTING_DOUBLE && s->type != SETTING_FLOAT;
        errno = 0;
        x = integer ? (double)strtoll(text, &end, 10) : strtod(text, &end);
        /* decimal, as settings_format writes it: strtod would take hex ("0x10") too */
        if (end == text || *end || errno == ERANGE ||
            strncmp(text + (*text == '-' || *text == '+'), "0x", 2) == 0 ||
            strncmp(text + (*text == '-' || *text == '+'), "0X", 2) == 0)
            cli_die(1, "%s: metadata '%s' is '%s', not %s", path, key, text,
                    integer ? "an integer" : "a decimal number");
        if (!(x >= lo(s) && x <= hi(s)) && !(zero_unset(s) && x == 0.0))
            cli_die(1, "%s: metadata '%s' = %s is out of range [%g, %g], the range of --%s",
                    path, key, text, lo(s), hi(s), s->name);
        if (s->type == SETTING_INT)
            *(int *)f = (int)x;
        else if (s->type == SETTING_LONG)
            *(long *)f = (long)x;
        else if (s->type == SETTING_BYTES)
            *(size_t *)f = (size_t)x;
        else if (s->type == SETTING_FLOAT)
            *(float *)f = (float)x;
        else
            *(double *)f = x;
        break;
    }
    case SETTING_SWITCH: {       /* the one place that knows a switch's two spellings */
        const char *no = library_key(s) ? "false" : "0", *yes = library_key(s) ? "true" : "1";
        if (strcmp(text, no) != 0 && strcmp(text, yes) != 0)
            cli_die(1, "%s: metadata '%s' is '%s', not %s or %s", path, key, text, no, yes);
        *(bool *)f = strcmp(text, yes) == 0;
        break;
    }
    case SETTING_CHOICE: case SETTING_STRING: {
        int i = 0;
        while (names && names[i] && strcmp(names[i], text) != 0)
            i++;
        if (names && !names[i])
            cli_die(1, "%s: --%s '%s' in the snapshot is not one this version knows", path,
                    s->name, text);
        if (s->type == SETTING_CHOICE)
            *(int *)f = i;
        else
            *(const char **)f = names ? names[i] : text;
        break;
    }
    case SETTING_FOLDER:
        if (!*text)
            cli_die(1, "%s: metadata '%s' is empty, not a folder's name", path, key);
        *(const char **)f = text;
        break;
    case SETTING_CUSTOM: {
        char flag[64];
        snprintf(flag, sizeof flag, "--%s", s->name);
        s->set(opts, s->id, flag, text);
        break;
    }
    }
}

/* The command line ---------------------------------------------------------------------------- */

/* A switch takes no value, nor does a custom setting without an argument name (an action). */
static bool takes_value(const Setting *s)
{
    return s->type != SETTING_SWITCH && !(s->type == SETTING_CUSTOM && !s->arg);
}

/* --settings-table (not in --help): the table as a TSV, one row per flag: its key, the schema
 * its range comes from, the range, the default, who writes the key and the merge rule (a row
 * of a run-only schema row: its schema, and "-" for the key, the writer and the merge). Read by
 * tests/test_schema_cli.c, which holds every flag that is a library setting to its schema's
 * row. */
static void print_table(const Setting *t, int n)
{
    static const char *const MERGE[] = { "kept", "onward", "free" };
    printf("flag\tkey\tschema\tlo\thi\tdefault\twritten\tmerge\n");
    for (int i = 0; i < n; i++) {
        const Setting *s = &t[i];
        if (!s->name)
            continue;
        bool number = s->type == SETTING_INT || s->type == SETTING_LONG ||
                      s->type == SETTING_DOUBLE || s->type == SETTING_FLOAT ||
                      s->type == SETTING_BYTES;
        const char *key = settings_key(s);
        printf("%s\t%s\t%s\t", s->name, key ? key : "-", s->schema ? s->schema->name : "-");
        if (number)
            printf("%.17g\t%.17g\t", lo(s), hi(s));
        else
            printf("-\t-\t");
        printf("%s\t%s\t%s\n", def(s) ? def(s) : "-",
               !key ? "-" : library_key(s) ? "library" : "program", key ? MERGE[s->merge] : "-");
    }
}

void settings_parse(const Setting *t, int n, void *opts, bool *given, int first_id,
                    void (*usage)(void), int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--settings-table") == 0) {
        print_table(t, n);
        exit(0);
    }
    static struct option longs[MAX_SETTINGS + 2];
    if (n > MAX_SETTINGS)       /* a program's own mistake, found at its first run */
        cli_die(1, "%d settings, more than the %d settings_parse holds", n, MAX_SETTINGS);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (t[i].name)
            longs[k++] = (struct option){ t[i].name, takes_value(&t[i]) ? required_argument
                                                                         : no_argument,
                                          NULL, t[i].id };
    longs[k++] = (struct option){ "help", no_argument, NULL, 'h' };
    longs[k] = (struct option){ 0, 0, 0, 0 };
    opterr = 0;     /* our own messages: one line naming the option */
    int c;
    while ((c = getopt_long(argc, argv, ":h", longs, NULL)) != -1) {
        if (c == 'h') {
            usage();
            exit(0);
        }
        if (c == ':')
            cli_usage_error("option '%s' needs a value", argv[optind - 1]);
        if (c == '?')
            cli_usage_error("unknown option '%s'", argv[optind - 1]);
        const Setting *s = settings_find(t, n, c);
        char flag[64];
        snprintf(flag, sizeof flag, "--%s", s->name);
        if (given)
            given[c - first_id] = true;
        set_from_flag(s, opts, flag, optarg);
        char why[200];
        if (s->check && !s->check(opts, why, sizeof why))
            cli_usage_error("%s %s: %s", flag, optarg ? optarg : "", why);
    }
    if (optind < argc)
        cli_usage_error("unexpected argument '%s'", argv[optind]);
}

void settings_check_needs(const Setting *t, int n, const void *opts, const bool *given,
                          int first_id, bool early)
{
    char value[SETTINGS_META_VALUE] = "";
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 2 && t[i].name && given[t[i].id - first_id]; k++) {
            const SettingNeed *need = t[i].needs[k];
            if (!need || need->early != early || need->holds(opts))
                continue;
            if (need->value_id)
                settings_format(settings_find(t, n, need->value_id), opts, value, sizeof value);
            cli_usage_error(need->refusal, t[i].name, value);
        }
}

const Setting *settings_find(const Setting *t, int n, int id)
{
    for (int i = 0; i < n; i++)
        if (t[i].name && t[i].id == id)
            return &t[i];
    return NULL;
}

/* "  --name ARG" then the help lines from column HELP_COLUMN (on a line of their own when the
 * flag is too wide), the default after the last (or under it, past HELP_WIDTH columns). */
static void usage_row(const Setting *s)
{
    char head[80];
    snprintf(head, sizeof head, "  --%s%s%s", s->name, s->arg ? " " : "", s->arg ? s->arg : "");
    printf("%s", head);
    int col = (int)strlen(head);
    if (col >= HELP_COLUMN) {
        printf("\n");
        col = 0;
    }
    const char *line = help(s);
    while (line) {
        const char *nl = strchr(line, '\n');
        int len = nl ? (int)(nl - line) : (int)strlen(line);
        printf("%*s%.*s", HELP_COLUMN - col, "", len, line);
        col = 0;
        if (!nl && def(s)) {
            /* a long default (a list) goes on a line of its own */
            bool wrap = HELP_COLUMN + len + (int)strlen(def(s)) + 11 > HELP_WIDTH;
            printf("%s%*s(default %s)", wrap ? "\n" : " ", wrap ? HELP_COLUMN : 0, "", def(s));
        }
        printf("\n");
        line = nl ? nl + 1 : NULL;
    }
}

void settings_usage(const Setting *t, int n)
{
    for (int i = 0; i < n; i++) {
        if (t[i].heading)
            printf("%s\n", t[i].heading);
        else
            usage_row(&t[i]);
    }
}

/* Snapshots ----------------------------------------------------------------------------------- */

void settings_format(const Setting *s, const void *opts, char *buf, size_t len)
{
    const void *f = cfield(s, opts);
    switch (s->type) {
    case SETTING_INT: snprintf(buf, len, "%d", *(const int *)f); break;
    case SETTING_LONG: snprintf(buf, len, "%ld", *(const long *)f); break;
    case SETTING_DOUBLE: snprintf(buf, len, "%.17g", *(const double *)f); break;
    case SETTING_FLOAT: snprintf(buf, len, "%.9g", (double)*(const float *)f); break;
    case SETTING_BYTES: snprintf(buf, len, "%zu", *(const size_t *)f); break;
    case SETTING_SWITCH: snprintf(buf, len, "%d", *(const bool *)f ? 1 : 0); break;
    case SETTING_CHOICE: {
        const char *names[MAX_NAMES];
        snprintf(buf, len, "%s", choices(s, names)[*(const int *)f]);
        break;
    }
    case SETTING_STRING: case SETTING_FOLDER: {
        const char *v = *(const char *const *)f;
        snprintf(buf, len, "%s", v ? v : "");
        break;
    }
    case SETTING_CUSTOM:
        if (s->format)
            s->format(opts, s->id, buf, len);
        else
            snprintf(buf, len, "?");
        break;
    }
}

void settings_meta_put(SettingsMeta *m, const char *key, const char *value)
{
    if (m->n == SETTINGS_META_MAX)      /* a program's own mistake, found at its first save */
        cli_die(1, "more than %d metadata keys for a snapshot", SETTINGS_META_MAX);
    snprintf(m->text[m->n], SETTINGS_META_VALUE, "%s", value);
    m->keys[m->n] = key;
    m->values[m->n] = m->text[m->n];
    m->n++;
}

static bool put_row(const SchemaRow *r, const char *key, const void *s, void *m)
{
    (void)key;      /* a temporary; the row's own is the whole key in a flat schema */
    char value[SETTINGS_META_VALUE];
    if (r->kept && (!r->applies || r->applies(s))) {
        schema_format(r, s, value, sizeof value);
        settings_meta_put(m, r->key, value);
    }
    return true;
}

void settings_meta_put_schema(SettingsMeta *m, const Schema *sc, const void *s)
{
    for (int i = 0; i < sc->n; i++)     /* the program's own mistake, found at its first save */
        if (sc->rows[i].type == SCHEMA_SUB)
            cli_die(1, "settings_meta_put_schema: %s is not flat", sc->name);
    schema_each(sc, NULL, s, put_row, m);
}

void settings_write(const Setting *t, int n, const void *opts, SettingsMeta *m)
{
    char value[SETTINGS_META_VALUE];
    for (int i = 0; i < n; i++)
        if (t[i].name && settings_key(&t[i]) && !library_key(&t[i]) &&
            (!t[i].applies || t[i].applies(opts))) {
            settings_format(&t[i], opts, value, sizeof value);
            settings_meta_put(m, settings_key(&t[i]), value);
        }
}

/* Compared as the snapshot stores them, so "0.1" typed and 0.1 saved agree. */
void settings_merge(const Setting *s, void *opts, bool given, const char *saved,
                    const char *path)
{
    char mine[4096], theirs[4096];
    settings_format(s, opts, mine, sizeof mine);
    set_from_key(s, opts, saved, path);
    settings_format(s, opts, theirs, sizeof theirs);
    if (!given || strcmp(mine, theirs) == 0)
        return;
    if (s->type == SETTING_SWITCH)
        cli_usage_error("--%s was given, but the snapshot %s was trained without it", s->name,
                        path);
    if (s->merge == SETTING_ONWARD) {
        /* the flag's value stays, if it is not before the snapshot's */
        set_from_key(s, opts, mine, path);
        if (atof(mine) >= atof(theirs))
            return;
        cli_usage_error("--%s %s is before the snapshot's %s (it counts from the start of the "
                        "first run)", s->name, mine, theirs);
    }
    cli_usage_error("--%s %s does not match the snapshot %s, which has %s", s->name, mine,
                    path, theirs);
}

const char *settings_saved_value(const SettingsSaved *saved, const char *key, const char *before)
{
    const char *value = saved->value(saved->source, key);
    if (!value)
        value = before;
    if (!value)
        cli_die(1, "%s: missing metadata '%s' (was it saved by %s?)", saved->path, key,
                saved->maker);
    return value;
}

void settings_merge_all(const Setting *t, int n, void *opts, const bool *given, int first_id,
                        const SettingsSaved *saved)
{
    char typed[SETTINGS_META_VALUE];
    for (int i = 0; i < n; i++) {
        const Setting *s = &t[i];
        if (!s->name || !settings_key(s) || s->merge == SETTING_FREE ||
            (s->applies && !s->applies(opts)))
            continue;
        const char *text = typed;
        if (s->type == SETTING_CUSTOM)
            settings_format(s, saved->theirs, typed, sizeof typed);
        else
            text = settings_saved_value(saved, settings_key(s), before(s));
        settings_merge(s, opts, given[s->id - first_id], text, saved->path);
    }
}

void settings_set_kernels(void *opts, int id, const char *flag, const char *text)
{
    (void)opts, (void)id;
    KernelsMode mode;
    if (!kernels_parse(text, &mode))
        cli_usage_error("%s %s: choose portable or fast", flag, text);
    kernels_set(mode);
    /* The programs another program starts (fit_largest's train_gpt runs, the seeds of
     * loss_scaling --jobs) run in the same mode. */
    setenv("TAPEGRAD_KERNELS", kernels_name(mode), 1);
}
