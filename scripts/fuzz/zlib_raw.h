// zlib's raw inflate for the fuzzer's reference (inflateInit2 is a macro Swift cannot call).
#include <zlib.h>
#include <string.h>
static inline int fuzz_inflate_init_raw(z_streamp strm, int window_bits) {
    memset(strm, 0, sizeof(*strm));
    return inflateInit2(strm, -window_bits);
}
