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
