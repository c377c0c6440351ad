/*
 * What LeakSanitizer reports inside libcrypto in the test process (docs/reliability.md,
 * "AddressSanitizer"): a thread that has used OpenSSL's random generator and ends after
 * OpenSSL's own exit handler (OPENSSL_cleanup, registered with atexit at the first use) leaves
 * its per-thread generator behind. OPENSSL_cleanup has deleted the thread-local keys by then, so
 * the thread's destructor no longer runs, and the thread is gone, so nothing points at the block.
 * Leaked: the EVP_RAND_CTX (40 bytes, "direct", from CRYPTO_zalloc in EVP_RAND_CTX_new, called by
 * RAND_get0_public) and what it holds ("indirect").
 *
 *   clang -g -fsanitize=address lsan-openssl-thread-exit-repro.c -o repro -lcrypto -lpthread
 *   ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0 ./repro
 *
 * prints "Direct leak of 40 byte(s) in 1 object(s)", EVP_RAND_CTX_new, RAND_get0_public,
 * RAND_bytes_ex (with the default fast unwinder the stack stops at CRYPTO_zalloc, as in the
 * suite's report: libcrypto keeps no frame pointers).
 */
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int release = 0;
static pthread_t worker;

static void *work(void *unused) {
    unsigned char bytes[16];
    RAND_bytes(bytes, sizeof bytes); /* this thread's own generator */
    pthread_mutex_lock(&lock);
    while (!release) pthread_cond_wait(&changed, &lock);
    pthread_mutex_unlock(&lock);
    return unused;
}

/* Registered before OpenSSL registers OPENSSL_cleanup, so it runs after it (atexit is LIFO). */
static void endTheWorkerLate(void) {
    pthread_mutex_lock(&lock);
    release = 1;
    pthread_cond_signal(&changed);
    pthread_mutex_unlock(&lock);
    pthread_join(worker, NULL);
    fprintf(stderr, "the worker ended after OPENSSL_cleanup\n");
}

int main(void) {
    atexit(endTheWorkerLate);
    unsigned char bytes[16];
    RAND_bytes(bytes, sizeof bytes); /* the first use: OpenSSL registers its atexit handler */
    pthread_create(&worker, NULL, work, NULL);
    usleep(200000);
    exit(0);
}
