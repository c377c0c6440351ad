// OpenSSL helpers (TLS, certificates, hashing, randomness).
#ifndef SMARTICO_COPENSSL_SHIM_SSL_H
#define SMARTICO_COPENSSL_SHIM_SSL_H
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <openssl/rand.h>
#endif
