// zlib helpers (permessage-deflate). deflateInit2/inflateInit2 are macros, which Swift cannot
// call; these wrappers fix the raw-deflate choices (negative window bits, Z_DEFLATED).
#ifndef SMARTICO_COPENSSL_SHIM_ZLIB_H
#define SMARTICO_COPENSSL_SHIM_ZLIB_H
#include <zlib.h>
#include <string.h>

/// Raw deflate (no zlib header) with a window of 2^window_bits bytes (9...15).
static inline int smartico_deflate_init_raw(z_streamp strm, int level, int window_bits, int mem_level) {
    memset(strm, 0, sizeof(*strm));
    return deflateInit2(strm, level, Z_DEFLATED, -window_bits, mem_level, Z_DEFAULT_STRATEGY);
}

/// Raw inflate (no zlib header) with a window of 2^window_bits bytes (8...15).
static inline int smartico_inflate_init_raw(z_streamp strm, int window_bits) {
    memset(strm, 0, sizeof(*strm));
    return inflateInit2(strm, -window_bits);
}
#endif
