#include "CFuzzerDriverFallback.h"

#include <stdio.h>
#include <stdlib.h>

/* Weak: when libFuzzer is linked (`-sanitize=fuzzer`), its LLVMFuzzerRunDriver replaces this one. */
__attribute__((weak)) int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *, size_t)) {
    int replayed = 0;
    for (int index = 1; index < *argc; index++) {
        const char *path = (*argv)[index];
        if (path[0] == '-') continue; /* a libFuzzer option: meaningless without libFuzzer */
        FILE *file = fopen(path, "rb");
        if (file == NULL) {
            fprintf(stderr, "curlew-fuzz: cannot open %s\n", path);
            return 1;
        }
        uint8_t *bytes = NULL;
        size_t count = 0, capacity = 0, got;
        do {
            if (count == capacity) {
                capacity = capacity ? capacity * 2 : 4096;
                bytes = realloc(bytes, capacity);
                if (bytes == NULL) { fclose(file); return 1; }
            }
            got = fread(bytes + count, 1, capacity - count, file);
            count += got;
        } while (got > 0);
        fclose(file);
        callback(bytes, count);
        free(bytes);
        replayed++;
    }
    fprintf(stderr, "curlew-fuzz: built without libFuzzer; replayed %d input(s)\n", replayed);
    return 0;
}
