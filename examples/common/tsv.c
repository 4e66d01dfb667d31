/* The programs' open-or-exit pair over autograd/tsv.h (examples/common/tsv.h). */
#include "examples/common/tsv.h"

#include <stdio.h>

#include "examples/common/cli.h"

TsvWriter *tsv_open_in(const char *dir, const char *name, const char *const *columns)
{
    char path[700], err[800];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    TsvWriter *w = tsv_open(path, columns, err, sizeof err);
    if (!w)
        cli_die(1, "%s", err);
    return w;
}

void tsv_close_or_die(TsvWriter *w)
{
    char err[800];
    if (!tsv_close(w, err, sizeof err))
        cli_die(1, "%s", err);
}
