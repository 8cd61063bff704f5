#ifndef CURLEW_FUZZER_DRIVER_FALLBACK_H
#define CURLEW_FUZZER_DRIVER_FALLBACK_H

#include <stddef.h>
#include <stdint.h>

/// libFuzzer's entry point for programs with a `main` of their own. `make fuzz` links libFuzzer, whose definition
/// wins; an ordinary build links the weak one in fallback.c, which runs each file named on the command line through
/// the callback once (a corpus replay), so `curlew-fuzz` builds and runs without the fuzzer too.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
