// The few OpenSSL and zlib entry points Swift cannot call directly (macros,
// variadic functions), as small static inline functions. Nothing else lives in C.
#ifndef SMARTICO_COPENSSL_SHIM_H
#define SMARTICO_COPENSSL_SHIM_H
#include "shim_ssl.h"
#include "shim_zlib.h"
#endif
