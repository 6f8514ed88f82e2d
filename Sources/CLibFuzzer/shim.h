// libFuzzer's driver entry point (compiler-rt's FuzzerInterface.h). Only a
// declaration: the symbol exists when groser-fuzz is linked with
// -sanitize=fuzzer (tools/fuzz), and nothing else refers to it.
#include <stddef.h>
#include <stdint.h>

typedef int (*groser_fuzz_callback)(const uint8_t *data, size_t size);

extern int LLVMFuzzerRunDriver(int *argc, char ***argv, groser_fuzz_callback callback);
