// OpenSSL helpers (TLS, certificates, hashing, randomness).
// Only what Swift cannot call directly: function-like macros and stack macros.
#ifndef SMARTICO_COPENSSL_SHIM_SSL_H
#define SMARTICO_COPENSSL_SHIM_SSL_H
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <openssl/rand.h>

// Linux event-loop system headers the Glibc module does not cover (Transport's event loop needs them).
// They sit here so Transport needs no extra C target; they add no code.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/prctl.h>
#include <netinet/tcp.h>
#include <malloc.h>  // malloc_trim (ProcessMemory)
#include <sys/syscall.h>
#include <unistd.h>

/// accept4 without _GNU_SOURCE (glibc declares it only under _GNU_SOURCE); flags: SOCK_NONBLOCK|SOCK_CLOEXEC.
extern int accept4(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags);
static inline int smartico_accept4(int fd, int flags) {
    return accept4(fd, NULL, NULL, flags);
}

/// Names the calling thread (shown by top -H, gdb); prctl is variadic.
static inline int smartico_set_thread_name(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}

/// Makes the calling process a child subreaper (PR_SET_CHILD_SUBREAPER): orphaned descendants
/// are reparented to it rather than to init, so it can kill and reap them; prctl is variadic.
static inline int smartico_set_child_subreaper(void) {
    return prctl(PR_SET_CHILD_SUBREAPER, 1UL, 0UL, 0UL, 0UL);
}

static inline int smartico_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}

static inline long smartico_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_mode(ctx, mode);
}

static inline int smartico_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}

/// Adds a hashed certificate directory (or a `:`-separated list) to a hash-dir lookup; CAs are read from it
/// only when a chain names them.
static inline int smartico_X509_LOOKUP_add_dir(X509_LOOKUP *lookup, const char *dirs) {
    return X509_LOOKUP_add_dir(lookup, dirs, X509_FILETYPE_PEM);
}

/// How many objects (certificates, CRLs) a store holds in memory.
static inline int smartico_X509_STORE_object_count(X509_STORE *store) {
    return sk_X509_OBJECT_num(X509_STORE_get0_objects(store));
}

/// Pointer to and length of the bytes held by a memory BIO.
static inline long smartico_BIO_get_mem_data(BIO *bio, char **data) {
    return BIO_get_mem_data(bio, data);
}

static inline int smartico_sk_X509_num(const STACK_OF(X509) *stack) {
    return sk_X509_num(stack);
}

static inline X509 *smartico_sk_X509_value(const STACK_OF(X509) *stack, int index) {
    return sk_X509_value(stack, index);
}

#endif
