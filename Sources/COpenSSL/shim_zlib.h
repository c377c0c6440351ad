// zlib helpers (permessage-deflate).
#ifndef SMARTICO_COPENSSL_SHIM_ZLIB_H
#define SMARTICO_COPENSSL_SHIM_ZLIB_H
#include <zlib.h>
#include <string.h>
#endif
