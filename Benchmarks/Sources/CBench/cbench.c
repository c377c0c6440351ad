#define _GNU_SOURCE
#include "cbench.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <fcntl.h>
#include <zlib.h>

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int read_full(int fd, char *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r <= 0) { if (r < 0 && errno == EINTR) continue; return -1; }
        got += (size_t)r;
    }
    return 0;
}

static int write_full(int fd, const char *buf, size_t n) {
    size_t put = 0;
    while (put < n) {
        ssize_t w = write(fd, buf + put, n - put);
        if (w <= 0) { if (w < 0 && errno == EINTR) continue; return -1; }
        put += (size_t)w;
    }
    return 0;
}

struct echo_args { int listen_fd; int size; int count; };

static void *echo_thread(void *p) {
    struct echo_args *a = p;
    int fd = accept(a->listen_fd, NULL, NULL);
    if (fd < 0) return NULL;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char *buf = malloc((size_t)a->size);
    for (int i = 0; i < a->count; i++) {
        if (read_full(fd, buf, (size_t)a->size) != 0) break;
        if (write_full(fd, buf, (size_t)a->size) != 0) break;
    }
    free(buf);
    close(fd);
    return NULL;
}

int cbench_tcp_pingpong(int iterations, int warmup, int size, uint64_t *rtt_ns) {
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0) return -1;
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(lfd, 1) != 0 ||
        getsockname(lfd, (struct sockaddr *)&addr, &len) != 0) { close(lfd); return -1; }
    struct echo_args args = { lfd, size, iterations + warmup };
    pthread_t t;
    if (pthread_create(&t, NULL, echo_thread, &args) != 0) { close(lfd); return -1; }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int rc = connect(fd, (struct sockaddr *)&addr, sizeof addr);
    char *buf = calloc(1, (size_t)size);
    for (int i = 0; rc == 0 && i < iterations + warmup; i++) {
        uint64_t t0 = now_ns();
        if (write_full(fd, buf, (size_t)size) != 0 || read_full(fd, buf, (size_t)size) != 0) { rc = -1; break; }
        if (i >= warmup) rtt_ns[i - warmup] = now_ns() - t0;
    }
    free(buf);
    close(fd);
    pthread_join(t, NULL);
    close(lfd);
    return rc;
}

// MARK: one-way loopback stream (reference for the simulator's push rate)

struct drain_args { int *fds; int conns; uint64_t total; int rc; };

static void *drain_thread(void *p) {
    struct drain_args *a = p;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) { a->rc = -1; return NULL; }
    for (int i = 0; i < a->conns; i++) {
        fcntl(a->fds[i], F_SETFL, fcntl(a->fds[i], F_GETFL) | O_NONBLOCK);
        struct epoll_event ev = { .events = EPOLLIN, .data.fd = a->fds[i] };
        epoll_ctl(ep, EPOLL_CTL_ADD, a->fds[i], &ev);
    }
    char *buf = malloc(1 << 16);
    uint64_t got = 0;
    struct epoll_event evs[128];
    while (got < a->total) {
        int n = epoll_wait(ep, evs, 128, 10000);
        if (n <= 0) { if (n < 0 && errno == EINTR) continue; a->rc = -1; break; }
        for (int i = 0; i < n; i++) {
            for (;;) {
                ssize_t r = read(evs[i].data.fd, buf, 1 << 16);
                if (r > 0) { got += (uint64_t)r; continue; }
                if (r < 0 && errno == EINTR) continue;
                if (r == 0) a->rc = -1;
                break;  // EAGAIN: drained for now
            }
        }
        if (a->rc) break;
    }
    free(buf);
    close(ep);
    return NULL;
}

int cbench_tcp_stream(int conns, int size, int msgs_per_conn, uint64_t *elapsed_ns) {
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0) return -1;
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(lfd, conns) != 0 ||
        getsockname(lfd, (struct sockaddr *)&addr, &len) != 0) { close(lfd); return -1; }
    int *readers = calloc((size_t)conns, sizeof(int));
    int *writers = calloc((size_t)conns, sizeof(int));
    int rc = 0, made = 0;
    for (; made < conns; made++) {
        readers[made] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (readers[made] < 0 || connect(readers[made], (struct sockaddr *)&addr, sizeof addr) != 0) { rc = -1; break; }
        writers[made] = accept(lfd, NULL, NULL);
        if (writers[made] < 0) { rc = -1; break; }
        int one = 1;
        setsockopt(writers[made], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    if (rc == 0) {
        struct drain_args a = { readers, conns, (uint64_t)conns * (uint64_t)size * (uint64_t)msgs_per_conn, 0 };
        char *msg = calloc(1, (size_t)size);
        memset(msg, 'x', (size_t)size);
        uint64_t t0 = now_ns();
        pthread_t t;
        if (pthread_create(&t, NULL, drain_thread, &a) != 0) rc = -1;
        for (int m = 0; rc == 0 && m < msgs_per_conn; m++)
            for (int i = 0; i < conns; i++)
                if (write_full(writers[i], msg, (size_t)size) != 0) { rc = -1; break; }
        if (rc == 0) {
            pthread_join(t, NULL);
            *elapsed_ns = now_ns() - t0;
            if (a.rc) rc = -1;
        } else {
            for (int i = 0; i < made; i++) shutdown(readers[i], SHUT_RDWR);
        }
        free(msg);
    }
    for (int i = 0; i < made; i++) { close(readers[i]); close(writers[i]); }
    free(readers);
    free(writers);
    close(lfd);
    return rc;
}

// MARK: zlib, directly

struct cbench_zlib { z_stream s; int deflating; };

cbench_zlib *cbench_deflater_new(int level, int window_bits, int mem_level) {
    cbench_zlib *z = calloc(1, sizeof *z);
    z->deflating = 1;
    if (deflateInit2(&z->s, level, Z_DEFLATED, -window_bits, mem_level, Z_DEFAULT_STRATEGY) != Z_OK) { free(z); return NULL; }
    return z;
}

cbench_zlib *cbench_inflater_new(int window_bits) {
    cbench_zlib *z = calloc(1, sizeof *z);
    if (inflateInit2(&z->s, -window_bits) != Z_OK) { free(z); return NULL; }
    return z;
}

void cbench_zlib_free(cbench_zlib *z) {
    if (!z) return;
    if (z->deflating) deflateEnd(&z->s); else inflateEnd(&z->s);
    free(z);
}

long cbench_deflate_message(cbench_zlib *z, const uint8_t *in, size_t len, uint8_t *out, size_t cap) {
    z->s.next_in = (Bytef *)in;
    z->s.avail_in = (uInt)len;
    z->s.next_out = out;
    z->s.avail_out = (uInt)cap;
    int rc = deflate(&z->s, Z_SYNC_FLUSH);
    if ((rc != Z_OK && rc != Z_BUF_ERROR) || z->s.avail_out == 0) return -1;
    long n = (long)(cap - z->s.avail_out);
    if (n >= 4 && out[n - 4] == 0 && out[n - 3] == 0 && out[n - 2] == 0xFF && out[n - 1] == 0xFF) n -= 4;
    deflateReset(&z->s);
    return n;
}

long cbench_inflate_message(cbench_zlib *z, const uint8_t *in, size_t len, uint8_t *out, size_t cap) {
    static const uint8_t tail[4] = { 0, 0, 0xFF, 0xFF };
    z->s.next_out = out;
    z->s.avail_out = (uInt)cap;
    z->s.next_in = (Bytef *)in;
    z->s.avail_in = (uInt)len;
    int rc = inflate(&z->s, Z_SYNC_FLUSH);
    if (rc != Z_OK && rc != Z_BUF_ERROR && rc != Z_STREAM_END) return -1;
    z->s.next_in = (Bytef *)tail;
    z->s.avail_in = 4;
    rc = inflate(&z->s, Z_SYNC_FLUSH);
    if (rc != Z_OK && rc != Z_BUF_ERROR && rc != Z_STREAM_END) return -1;
    long n = (long)(cap - z->s.avail_out);
    inflateReset(&z->s);
    return n;
}
