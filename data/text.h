#ifndef TAPEGRAD_TEXT_H
#define TAPEGRAD_TEXT_H
/* Text data for --data PATH: a character-level language model over any file.
 *
 * Tokens are bytes. The vocabulary is the sorted set of distinct bytes in the file, so id 0 is
 * the smallest byte present and the vocabulary is as small as the text allows. The first 90%
 * of the file trains, the last 10% validates (the split is a position, so no byte of validation
 * text is ever trained on, though a phrase may of course occur in both parts).
 *
 * A training row is a window of T + 1 bytes starting anywhere in the training part (uniformly):
 * tokens are its first T bytes, targets its last T (every position has a target). Validation
 * rows are consecutive windows at offsets 0, T, 2T, ... of the validation part, so each
 * validation byte after the first is predicted exactly once over the whole set. */
#include <stdbool.h>
#include <stddef.h>

#include "autograd/rng.h"

typedef struct TextData TextData;

/* Reads the file for rows of length T. NULL with a message in err when the file cannot be read,
 * is empty, or is too short for one window of T + 1 bytes in each part (at least 10 (T + 1)
 * bytes), or is 2 GiB or more. */
TextData   *text_open(const char *path, int T, char *err, size_t errlen);
void        text_free(TextData *d);

int         text_vocab_size(const TextData *d);
int         text_seq_len(const TextData *d);         /* T */
size_t      text_train_len(const TextData *d);       /* bytes in the training part */
size_t      text_val_len(const TextData *d);         /* bytes in the validation part */

/* B random training windows: tokens and targets are [B * T]. */
void        text_train_batch(const TextData *d, Rng *rng, int B, int *tokens, int *targets);
/* Number of validation windows, and rows for windows first, first + 1, ...: all B rows are
 * filled and the number of real windows returned; the rest are padding (token 0, target -1). */
int         text_val_count(const TextData *d);
int         text_val_batch(const TextData *d, int first, int B, int *tokens, int *targets);

/* The id of a byte (-1 if the file never contains it), the byte of an id, and n tokens as text
 * in buf (truncated to fit; always terminated). */
int         text_token(const TextData *d, unsigned char c);
unsigned char text_char(const TextData *d, int id);
const char *text_decode(const TextData *d, const int *tokens, int n, char *buf, size_t len);

#endif
