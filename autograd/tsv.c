#include "autograd/tsv.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/outfile.h"
#include "autograd/tensor.h"

struct TsvWriter {
    OutFile out;         /* rows go to out.tmp until tsv_close (autograd/outfile.h) */
    FILE *f;
    char *path;          /* as the caller named it, for messages */
    int   n_columns;
    int   cell;          /* cells written in the current row */
    int   write_errno;   /* first failure, 0 if none */
};

/* Integers up to 2^53 are exact in a double and read best without an exponent. */
static bool print_integral(double v, char *buf, size_t len)
{
    if (v != floor(v) || fabs(v) >= 9007199254740992.0)
        return false;
    snprintf(buf, len, "%.0f", v);
    return true;
}

static bool print_nonfinite(double v, char *buf, size_t len)
{
    if (isfinite(v))
        return false;
    snprintf(buf, len, "%s", isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
    return true;
}

/* 17 significant digits always round-trip a double, 9 a float; try fewer first. */
const char *tsv_format_double(double v, char *buf, size_t len)
{
    if (print_nonfinite(v, buf, len) || print_integral(v, buf, len))
        return buf;
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(buf, len, "%.*g", digits, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    return buf;
}

const char *tsv_format_float(float v, char *buf, size_t len)
{
    if (print_nonfinite(v, buf, len) || print_integral(v, buf, len))
        return buf;
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(buf, len, "%.*g", digits, (double)v);
        if (strtof(buf, NULL) == v)
            break;
    }
    return buf;
}

static char *dup_str(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 1);
    if (!s)
        tensor_fatal("out of memory for a file name");
    memcpy(s, a, la);
    memcpy(s + la, b, lb + 1);
    return s;
}

static void free_writer(TsvWriter *w)
{
    free(w->path);
    free(w);
}

/* Every cell goes through here: the separator, the text (tabs and newlines made spaces), and
 * the column count check. */
static void put_cell(TsvWriter *w, const char *text)
{
    if (w->cell >= w->n_columns)
        tensor_fatal("%s: row has more than %d cells", w->path, w->n_columns);
    if (w->cell++ > 0)
        fputc('\t', w->f);
    for (const char *c = text; *c; c++)
        fputc(*c == '\t' || *c == '\n' || *c == '\r' ? ' ' : *c, w->f);
}

static bool finish_line(TsvWriter *w)
{
    errno = 0;
    fputc('\n', w->f);
    w->cell = 0;
    if ((ferror(w->f) || fflush(w->f) != 0) && !w->write_errno)
        w->write_errno = errno ? errno : EIO;
    return w->write_errno == 0;
}

TsvWriter *tsv_open(const char *path, const char *const *columns, char *err, size_t errlen)
{
    TsvWriter *w = calloc(1, sizeof *w);
    if (!w)
        tensor_fatal("out of memory for a TSV writer");
    w->path = dup_str(path ? path : "", "");
    while (columns[w->n_columns])
        w->n_columns++;
    if (w->n_columns == 0)
        tensor_fatal("%s: a TSV file needs at least one column", w->path);
    if (!outfile_open(&w->out, path, err, errlen)) {
        free_writer(w);
        return NULL;
    }
    w->f = outfile_stream(&w->out);
    if (!w->f) {
        if (err && errlen)
            snprintf(err, errlen, "%s: out of memory", w->path);
        outfile_abort(&w->out);
        free_writer(w);
        return NULL;
    }
    for (int i = 0; i < w->n_columns; i++)
        put_cell(w, columns[i]);
    finish_line(w);
    return w;
}

void tsv_str(TsvWriter *w, const char *s) { put_cell(w, s ? s : ""); }

void tsv_num(TsvWriter *w, double v)
{
    char buf[32];
    put_cell(w, tsv_format_double(v, buf, sizeof buf));
}

void tsv_num_or_empty(TsvWriter *w, double v)
{
    if (isnan(v))
        put_cell(w, "");
    else
        tsv_num(w, v);
}

void tsv_float(TsvWriter *w, float v)
{
    char buf[32];
    put_cell(w, tsv_format_float(v, buf, sizeof buf));
}

void tsv_int(TsvWriter *w, long long v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", v);
    put_cell(w, buf);
}

bool tsv_end_row(TsvWriter *w)
{
    if (w->cell != w->n_columns)
        tensor_fatal("%s: row has %d cells, the header %d", w->path, w->cell, w->n_columns);
    return finish_line(w);
}

bool tsv_row(TsvWriter *w, const double *values)
{
    for (int i = 0; i < w->n_columns; i++)
        tsv_num(w, values[i]);
    return tsv_end_row(w);
}

bool tsv_close(TsvWriter *w, char *err, size_t errlen)
{
    if (!w)
        return true;
    bool ok;
    if (w->write_errno) {
        if (err && errlen)
            snprintf(err, errlen, "%s: writing failed: %s", w->path, strerror(w->write_errno));
        outfile_abort(&w->out);
        ok = false;
    } else {
        ok = outfile_commit(&w->out, err, errlen);
    }
    free_writer(w);
    return ok;
}
