#ifndef TAPEGRAD_OUTFILE_H
#define TAPEGRAD_OUTFILE_H
/* An output file written whole or not at all: what every program's --log, --save, --plot and
 * figure goes through, so that a run that fails halfway leaves the old file as it was.
 *
 *     OutFile o;
 *     if (!outfile_open(&o, path, err, sizeof err)) ... err names the path and the reason
 *     write to o.fd, or through FILE *f = outfile_stream(&o) ...
 *     if (!outfile_commit(&o, err, sizeof err)) ...    // or outfile_abort(&o) on failure
 *
 * What the path names decides how:
 *   - a regular file, or nothing yet: the data goes to a temporary file with a unique name in
 *     the same folder (".NAME.XXXXXX", so the rename cannot cross file systems and two runs
 *     cannot share it), flushed to disk, then renamed over the path; on any failure, on
 *     outfile_abort, and on an exit() before the commit (a program ending on an error), the
 *     temporary file is removed and the path is untouched;
 *   - a symbolic link: the same, at the file the link points to (the link stays a link);
 *   - anything else that can be written (a terminal, a pipe, /dev/null): written through,
 *     since renaming a regular file over a device would replace the device;
 *   - a folder, an empty path, or a path in a folder that does not exist: refused.
 * outfile_check_writable answers, before a long run, whether its output could be written
 * (the folder exists and accepts files), so a run does not fail only at the end. */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct {
    char *path;     /* where the data ends up (a symlink resolved) */
    char *tmp;      /* the temporary file, or NULL when written through */
    int   fd;
    FILE *stream;   /* set by outfile_stream; then it owns fd */
} OutFile;

bool outfile_open(OutFile *o, const char *path, char *err, size_t errlen);
/* A stdio stream on the file (made once; commit and abort close it). NULL if out of memory. */
FILE *outfile_stream(OutFile *o);
/* Flushes and closes, then renames the temporary file over the path. Frees o's strings. */
bool outfile_commit(OutFile *o, char *err, size_t errlen);
/* Closes and removes the temporary file; the path keeps what it had. */
void outfile_abort(OutFile *o);
/* False, with the reason, for a path (links followed) that names a folder, a named FIFO or a
 * socket: what a program's own output file cannot be (a FIFO would hold the run until a reader
 * came; a snapshot must be a file). The process's own pipes (/dev/stdout piped) are not named
 * FIFOs and pass. */
bool outfile_check_kind(const char *path, char *err, size_t errlen);
/* The name outfile_open would write through or rename to, a temporary file created there and
 * removed again: false, with the reason, when that fails. */
bool outfile_check_writable(const char *path, char *err, size_t errlen);

/* Whole buffers through a descriptor (a file, or a pipe between processes), retrying after a
 * signal: all n bytes written, 0, or the errno of the failure (EIO when nothing more goes in);
 * and up to len bytes read, stopping early at end of file or on an error: the count read. */
int    outfile_write_all(int fd, const void *buf, size_t n);
size_t outfile_read_all(int fd, void *buf, size_t len);

#endif
