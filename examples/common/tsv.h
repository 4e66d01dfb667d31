#ifndef TAPEGRAD_TSV_H
#define TAPEGRAD_TSV_H
/* TSV logs for programs: the writer is autograd/tsv.h's (below the rooms, so that a room can
 * write the result files of its rows with it); here the pair for programs that write several
 * files into one output folder: tsv_open of DIR/NAME, and tsv_close, that end the program with
 * the message (exit status 1) instead of returning it. */
#include "autograd/tsv.h"

TsvWriter  *tsv_open_in(const char *dir, const char *name, const char *const *columns);
void        tsv_close_or_die(TsvWriter *w);

#endif
