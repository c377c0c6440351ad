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

/// A hint to the CPU that the caller is in a spin-wait loop (x86 `pause`, Arm `yield`): it
/// saves power and lets the sibling hyper-thread run. A no-op elsewhere.
static inline void smartico_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield");
#endif
}

/// The CPU the calling thread is running on, or -1 (sched_getcpu: glibc declares it only under
/// _GNU_SOURCE; it reads the rseq area or the vDSO, no system call).
extern int sched_getcpu(void);
static inline int smartico_current_cpu(void) {
    return sched_getcpu();
}

/// Pins thread `tid` (0: the caller) to CPU `cpu` (sched_setaffinity through the raw syscall).
static inline int smartico_pin_thread(int tid, int cpu) {
    unsigned long mask[16] = {0};
    if (cpu < 0 || cpu >= (int)(sizeof(mask) * 8)) return -1;
    mask[cpu / (8 * sizeof(unsigned long))] = 1ul << (cpu % (8 * sizeof(unsigned long)));
    return (int)syscall(SYS_sched_setaffinity, tid, sizeof(mask), mask);
}

/// How many CPUs the calling thread may run on (its affinity mask, through the raw syscall:
/// glibc's wrapper and CPU_COUNT need _GNU_SOURCE); the online count when that fails.
static inline int smartico_usable_cpus(void) {
    unsigned long mask[16] = {0};
    long bytes = syscall(SYS_sched_getaffinity, 0, sizeof(mask), mask);
    if (bytes <= 0) return (int)sysconf(_SC_NPROCESSORS_ONLN);
    int count = 0;
    for (long i = 0; i < bytes / (long)sizeof(unsigned long); i++) count += __builtin_popcountl(mask[i]);
    return count;
}

/// Writes back the dirty pages of [offset, offset + bytes) and waits for them (sync_file_range with
/// SYNC_FILE_RANGE_WAIT_BEFORE | WRITE | WAIT_AFTER; glibc declares it only under _GNU_SOURCE).
/// Data only: no metadata, no device cache flush (fdatasync does those).
static inline int smartico_write_back_range(int fd, long long offset, long long bytes) {
    return (int)syscall(SYS_sync_file_range, fd, offset, bytes, 1u | 2u | 4u);
}

/// Puts the calling thread's disk I/O in the idle class: served when no other I/O waits
/// (ioprio_set(IOPRIO_WHO_PROCESS, this thread, IOPRIO_CLASS_IDLE); no glibc wrapper).
static inline int smartico_set_io_priority_idle(void) {
    return (int)syscall(SYS_ioprio_set, 1, 0, 3 << 13);
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
