#ifndef TAPEGRAD_FUZZ_FILE_H
#define TAPEGRAD_FUZZ_FILE_H
/* The fuzz harnesses' input as a file: the snapshot readers open paths, not buffers. One file
 * per process (its pid in the name) under $TMPDIR, rewritten for every input. Header-only: each
 * harness is built on its own by `make fuzz`. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

enum { FUZZ_PATH_LEN = 512 };

static inline int fuzz_file_write(const uint8_t *data, size_t size, char path[FUZZ_PATH_LEN])
{
    const char *tmp = getenv("TMPDIR");
    snprintf(path, FUZZ_PATH_LEN, "%s/tapegrad-fuzz-%ld.safetensors", tmp && *tmp ? tmp : "/tmp",
             (long)getpid());
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    int ok = fwrite(data, 1, size, f) == size;
    return fclose(f) == 0 && ok;
}

#endif
