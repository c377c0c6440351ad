// libFuzzer's driver entry (compiler-rt, linked by -sanitize=fuzzer): the fuzz targets call it from
// their main, since SwiftPM gives each executable its own entry point name and libFuzzer's main is
// then not linked.
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));
