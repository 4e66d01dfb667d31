/* How the run reports a failure (run/run.h): through the program's handler, which knows how its
 * messages look (a usage error's hint, its name), or "PROGRAM: message" and exit. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "autograd/tensor.h"
#include "run/run.h"

static RunFailHandler handler;

void run_on_failure(RunFailHandler h) { handler = h; }

void run_fail(int code, const char *fmt, ...)
{
    char message[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    if (handler)
        handler(code, message);
    fprintf(stderr, "%s: %s\n", tensor_program(), message);
    exit(code);
}
