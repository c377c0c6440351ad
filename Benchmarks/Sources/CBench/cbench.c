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
#include <sys/ioctl.h>
#include <fcntl.h>
#include <zlib.h>

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A TCP listener on 127.0.0.1, port chosen by the kernel (written to *addr); -1 on failure. */
static int listen_loopback(int backlog, struct sockaddr_in *addr) {
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0) return -1;
    memset(addr, 0, sizeof *addr);
    addr->sin_family = AF_INET;
    addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof *addr;
    if (bind(lfd, (struct sockaddr *)addr, sizeof *addr) != 0 || listen(lfd, backlog) != 0 ||
        getsockname(lfd, (struct sockaddr *)addr, &len) != 0) { close(lfd); return -1; }
    return lfd;
}

/* A TCP connection to *addr with TCP_NODELAY; -1 on failure. */
static int dial_nodelay(const struct sockaddr_in *addr) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (const struct sockaddr *)addr, sizeof *addr) != 0) { close(fd); return -1; }
    return fd;
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
    if (fd >= 0) close(fd);
    return NULL;
}

int cbench_tcp_pingpong(int iterations, int warmup, int size, uint64_t *rtt_ns) {
    struct sockaddr_in addr;
    int lfd = listen_loopback(1, &addr);
    if (lfd < 0) return -1;
    struct echo_args args = { lfd, size, iterations + warmup };
    pthread_t t;
    if (pthread_create(&t, NULL, echo_thread, &args) != 0) { close(lfd); return -1; }
    int fd = dial_nodelay(&addr);
    int rc = fd < 0 ? -1 : 0;
    char *buf = calloc(1, (size_t)size);
    for (int i = 0; rc == 0 && i < iterations + warmup; i++) {
        uint64_t t0 = now_ns();
        if (write_full(fd, buf, (size_t)size) != 0 || read_full(fd, buf, (size_t)size) != 0) { rc = -1; break; }
        if (i >= warmup) rtt_ns[i - warmup] = now_ns() - t0;
    }
    free(buf);
    if (fd >= 0) close(fd);
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
    struct sockaddr_in addr;
    int lfd = listen_loopback(conns, &addr);
    if (lfd < 0) return -1;
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

/* ---- end-to-end latency: line receiver and C relay ---- */

#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/un.h>

uint64_t cbench_now_ns(void) { return now_ns(); }

struct rx_conn {
    int fd;
    char *buf;
    size_t len, cap;
    int64_t got;
};

struct cbench_rx {
    pthread_t thread;
    struct rx_conn *conns;
    int nfds;
    int64_t per_fd, id_base;
    uint64_t *recv_ns;
    int timeout_ms;
    _Atomic int64_t count;
    int64_t stray;
    int status;
};

static const char ID_KEY[] = "\"engagement_id\":";

/* Stamps the complete lines in conns[idx]'s buffer with `t` (when the read that completed them returned). */
static void rx_lines(struct cbench_rx *rx, int idx, uint64_t t) {
    struct rx_conn *c = &rx->conns[idx];
    size_t start = 0;
    for (;;) {
        char *nl = memchr(c->buf + start, '\n', c->len - start);
        if (!nl) break;
        size_t linelen = (size_t)(nl - (c->buf + start));
        char *k = memmem(c->buf + start, linelen, ID_KEY, sizeof ID_KEY - 1);
        int64_t id = -1;
        if (k) id = strtoll(k + sizeof ID_KEY - 1, NULL, 10);
        int64_t slot = id - rx->id_base;
        if (k && slot >= 0 && slot < rx->per_fd) {
            uint64_t *cell = &rx->recv_ns[(int64_t)idx * rx->per_fd + slot];
            if (*cell == 0) { *cell = t; c->got++; atomic_fetch_add(&rx->count, 1); }
        } else {
            rx->stray++;
        }
        start += linelen + 1;
    }
    if (start > 0) { memmove(c->buf, c->buf + start, c->len - start); c->len -= start; }
}

static void *rx_thread(void *p) {
    struct cbench_rx *rx = p;
    struct pollfd *pfds = calloc((size_t)rx->nfds, sizeof *pfds);
    int done = 0;
    rx->status = 0;
    while (done < rx->nfds) {
        int n = 0;
        for (int i = 0; i < rx->nfds; i++) {
            pfds[i].fd = rx->conns[i].got >= rx->per_fd ? -1 : rx->conns[i].fd;
            pfds[i].events = POLLIN;
            pfds[i].revents = 0;
        }
        n = poll(pfds, (nfds_t)rx->nfds, rx->timeout_ms);
        if (n < 0) { if (errno == EINTR) continue; rx->status = 2; break; }
        if (n == 0) { rx->status = 1; break; }
        for (int i = 0; i < rx->nfds && rx->status == 0; i++) {
            if (!pfds[i].revents) continue;
            struct rx_conn *c = &rx->conns[i];
            if (c->cap - c->len < 65536) {
                if (c->cap >= (1u << 20)) { rx->status = 2; break; }
                c->cap *= 2;
                c->buf = realloc(c->buf, c->cap);
            }
            ssize_t r = read(c->fd, c->buf + c->len, c->cap - c->len);
            if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            if (r <= 0) { rx->status = 2; break; }
            c->len += (size_t)r;
            rx_lines(rx, i, now_ns());
            if (c->got >= rx->per_fd) done++;
        }
        if (rx->status) break;
    }
    free(pfds);
    return NULL;
}

cbench_rx *cbench_rx_start(const int *fds, int nfds, int64_t per_fd, int64_t id_base,
                           uint64_t *recv_ns, int timeout_ms) {
    struct cbench_rx *rx = calloc(1, sizeof *rx);
    rx->conns = calloc((size_t)nfds, sizeof *rx->conns);
    for (int i = 0; i < nfds; i++) {
        rx->conns[i].fd = fds[i];
        rx->conns[i].cap = 262144;
        rx->conns[i].buf = malloc(rx->conns[i].cap);
    }
    rx->nfds = nfds;
    rx->per_fd = per_fd;
    rx->id_base = id_base;
    rx->recv_ns = recv_ns;
    rx->timeout_ms = timeout_ms;
    memset(recv_ns, 0, sizeof(uint64_t) * (size_t)nfds * (size_t)per_fd);
    atomic_store(&rx->count, 0);
    if (pthread_create(&rx->thread, NULL, rx_thread, rx) != 0) {
        for (int i = 0; i < nfds; i++) free(rx->conns[i].buf);
        free(rx->conns); free(rx);
        return NULL;
    }
    return rx;
}

int64_t cbench_rx_count(cbench_rx *rx) { return atomic_load(&rx->count); }

int cbench_rx_join(cbench_rx *rx, int64_t *stray) {
    pthread_join(rx->thread, NULL);
    int status = rx->status;
    if (stray) *stray = rx->stray;
    for (int i = 0; i < rx->nfds; i++) free(rx->conns[i].buf);
    free(rx->conns);
    free(rx);
    return status;
}

static void sleep_until(uint64_t t) {
    struct timespec ts = { (time_t)(t / 1000000000ull), (long)(t % 1000000000ull) };
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
}

/* A message: `"engagement_id":N,` then padding, then (for lines) a newline. */
static void fill_message(char *buf, int size, int64_t id, int line) {
    int n = snprintf(buf, (size_t)size, "{\"cid\":110,\"engagement_id\":%lld,\"pad\":\"", (long long)id);
    memset(buf + n, 'x', (size_t)(size - n));
    if (line) { buf[size - 3] = '"'; buf[size - 2] = '}'; buf[size - 1] = '\n'; }
}

struct relay_args {
    int listen_fd, in_size, out_size, subscribers;
    int64_t events;
    int *sub_fds;
    int journal_fd;  /* -1: forward at once; else journal (pwrite + fdatasync) before forwarding */
};

/* The journal region the journaled relay rewrites, like SQLite's WAL between checkpoints. */
#define RELAY_JOURNAL_BYTES (4 << 20)

/* The journaled relay: group commit on one thread. Waits for a message, takes every further
   complete message already received, appends them all to the journal with one pwrite and one
   fdatasync, then writes their lines. A message arriving during the fdatasync waits for the
   next one, as an event arriving during the daemon's commit does. */
static void journaled_relay_loop(struct relay_args *a, int fd, char *out) {
    int64_t max_batch = RELAY_JOURNAL_BYTES / a->in_size;
    if (max_batch > 256) max_batch = 256;
    char *in = malloc((size_t)a->in_size * (size_t)max_batch);
    off_t offset = 0;
    for (int64_t done = 0; done < a->events;) {
        if (read_full(fd, in, (size_t)a->in_size) != 0) break;
        int64_t batch = 1;
        int avail = 0;
        if (ioctl(fd, FIONREAD, &avail) == 0) {
            int64_t more = avail / a->in_size;
            if (more > max_batch - 1) more = max_batch - 1;
            if (more > a->events - done - 1) more = a->events - done - 1;
            if (more > 0 && read_full(fd, in + a->in_size, (size_t)(more * a->in_size)) != 0) break;
            if (more > 0) batch += more;
        }
        size_t bytes = (size_t)(batch * a->in_size);
        if (offset + (off_t)bytes > RELAY_JOURNAL_BYTES) offset = 0;
        if (pwrite(a->journal_fd, in, bytes, offset) != (ssize_t)bytes || fdatasync(a->journal_fd) != 0) break;
        offset += (off_t)bytes;
        for (int64_t m = 0; m < batch; m++) {
            char *msg = in + m * a->in_size;
            char *k = memmem(msg, (size_t)a->in_size, ID_KEY, sizeof ID_KEY - 1);
            int64_t id = k ? strtoll(k + sizeof ID_KEY - 1, NULL, 10) : -1;
            fill_message(out, a->out_size, id, 1);
            for (int s = 0; s < a->subscribers; s++)
                if (write_full(a->sub_fds[s], out, (size_t)a->out_size) != 0) goto done;
        }
        done += batch;
    }
done:
    free(in);
}

static void *relay_thread(void *p) {
    struct relay_args *a = p;
    int fd = accept(a->listen_fd, NULL, NULL);
    if (fd < 0) return NULL;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char *in = malloc((size_t)a->in_size);
    char *out = malloc((size_t)a->out_size);
    if (a->journal_fd >= 0) {
        journaled_relay_loop(a, fd, out);
        goto done;
    }
    for (int64_t i = 0; i < a->events; i++) {
        if (read_full(fd, in, (size_t)a->in_size) != 0) break;
        char *k = memmem(in, (size_t)a->in_size, ID_KEY, sizeof ID_KEY - 1);
        int64_t id = k ? strtoll(k + sizeof ID_KEY - 1, NULL, 10) : -1;
        fill_message(out, a->out_size, id, 1);
        for (int s = 0; s < a->subscribers; s++)
            if (write_full(a->sub_fds[s], out, (size_t)a->out_size) != 0) goto done;
    }
done:
    free(in); free(out);
    if (fd >= 0) close(fd);
    return NULL;
}

int cbench_relay(int subscribers, int64_t events, int rate, int in_size, int out_size,
                 int64_t id_base, uint64_t *send_ns, uint64_t *recv_ns) {
    return cbench_journaled_relay(subscribers, events, rate, in_size, out_size, id_base, NULL, send_ns, recv_ns);
}

/* Opens `path` and writes the journal region once (then fsyncs), so the relay's syncs rewrite
   allocated blocks: data only, as the WAL's are between checkpoints. */
static int open_relay_journal(const char *path) {
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    char *zero = calloc(1, 1 << 16);
    for (off_t o = 0; o < RELAY_JOURNAL_BYTES; o += 1 << 16)
        if (pwrite(fd, zero, 1 << 16, o) != 1 << 16) { free(zero); close(fd); return -1; }
    free(zero);
    if (fsync(fd) != 0) { close(fd); return -1; }
    return fd;
}

int cbench_journaled_relay(int subscribers, int64_t events, int rate, int in_size, int out_size,
                           int64_t id_base, const char *journal_path, uint64_t *send_ns, uint64_t *recv_ns) {
    if (in_size < 64 || out_size < 64) { errno = EINVAL; return -1; }
    int journal_fd = -1;
    if (journal_path && (journal_fd = open_relay_journal(journal_path)) < 0) return -1;
    struct sockaddr_in addr;
    int lfd = listen_loopback(1, &addr);
    if (lfd < 0) { if (journal_fd >= 0) close(journal_fd); return -1; }
    int *relay_side = calloc((size_t)subscribers, sizeof(int));
    int *peer_side = calloc((size_t)subscribers, sizeof(int));
    for (int s = 0; s < subscribers; s++) {
        int pair[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) { close(lfd); return -1; }
        relay_side[s] = pair[0];
        peer_side[s] = pair[1];
    }
    struct relay_args args = { lfd, in_size, out_size, subscribers, events, relay_side, journal_fd };
    pthread_t t;
    if (pthread_create(&t, NULL, relay_thread, &args) != 0) { close(lfd); return -1; }
    cbench_rx *rx = cbench_rx_start(peer_side, subscribers, events, id_base, recv_ns, 10000);
    int fd = dial_nodelay(&addr);
    int rc = fd < 0 ? -1 : 0;
    char *buf = malloc((size_t)in_size);
    uint64_t start = now_ns();
    uint64_t period = rate > 0 ? 1000000000ull / (uint64_t)rate : 0;
    for (int64_t i = 0; rc == 0 && i < events; i++) {
        if (period) sleep_until(start + (uint64_t)i * period);
        fill_message(buf, in_size, id_base + i, 0);
        send_ns[i] = now_ns();
        if (write_full(fd, buf, (size_t)in_size) != 0) { rc = -1; break; }
    }
    int64_t stray = 0;
    int st = cbench_rx_join(rx, &stray);
    free(buf);
    if (fd >= 0) close(fd);
    pthread_join(t, NULL);
    close(lfd);
    for (int s = 0; s < subscribers; s++) { close(relay_side[s]); close(peer_side[s]); }
    free(relay_side); free(peer_side);
    if (journal_fd >= 0) { close(journal_fd); unlink(journal_path); }
    return rc != 0 ? rc : st;
}

/* ---- small process and socket helpers for the daemon benchmarks ---- */

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

extern char **environ;

int cbench_unix_connect(const char *path) {
    struct sockaddr_un a = {0};
    a.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof a.sun_path) { errno = ENAMETOOLONG; return -1; }
    strcpy(a.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { int e = errno; close(fd); errno = e; return -1; }
    return fd;
}

int cbench_write_all(int fd, const void *buf, size_t n) { return write_full(fd, buf, n); }

long cbench_read_line(int fd, char *buf, size_t cap, int timeout_ms) {
    uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ull;
    size_t len = 0;
    for (;;) {
        uint64_t now = now_ns();
        if (now >= deadline) return -2;
        struct pollfd p = { fd, POLLIN, 0 };
        int n = poll(&p, 1, (int)((deadline - now) / 1000000ull) + 1);
        if (n < 0) { if (errno == EINTR) continue; return -1; }
        if (n == 0) return -2;
        char c;
        ssize_t r = read(fd, &c, 1);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        if (c == '\n') { buf[len] = 0; return (long)len; }
        if (len + 1 >= cap) return -3;
        buf[len++] = c;
    }
}

int cbench_notify_bind(const char *path) {
    struct sockaddr_un a = {0};
    a.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof a.sun_path) { errno = ENAMETOOLONG; return -1; }
    strcpy(a.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    unlink(path);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) { int e = errno; close(fd); errno = e; return -1; }
    return fd;
}

uint64_t cbench_notify_wait_ready(int fd, int timeout_ms) {
    uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ull;
    char buf[4096];
    for (;;) {
        uint64_t now = now_ns();
        if (now >= deadline) return 0;
        struct pollfd p = { fd, POLLIN, 0 };
        int n = poll(&p, 1, (int)((deadline - now) / 1000000ull) + 1);
        if (n < 0) { if (errno == EINTR) continue; return 0; }
        if (n == 0) return 0;
        ssize_t r = recv(fd, buf, sizeof buf - 1, 0);
        uint64_t t = now_ns();
        if (r < 0) { if (errno == EINTR) continue; return 0; }
        buf[r] = 0;
        /* READY=1 as a whole line of the datagram. */
        for (char *line = buf; line && *line; ) {
            char *nl = strchr(line, '\n');
            size_t l = nl ? (size_t)(nl - line) : strlen(line);
            if (l == 7 && memcmp(line, "READY=1", 7) == 0) return t;
            line = nl ? nl + 1 : NULL;
        }
    }
}

int cbench_spawn_daemon(const char *binary, const char *config_path, const char *notify_socket,
                        const char *log_path, uint64_t *spawned_ns) {
    size_t n = 0;
    while (environ[n]) n++;
    char **envp = calloc(n + 2, sizeof(char *));
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "NOTIFY_SOCKET=", 14) != 0 && strncmp(environ[i], "LISTEN_", 7) != 0) envp[k++] = environ[i];
    char *notify = NULL;
    if (notify_socket) {
        notify = malloc(strlen(notify_socket) + 16);
        sprintf(notify, "NOTIFY_SOCKET=%s", notify_socket);
        envp[k++] = notify;
    }
    envp[k] = NULL;
    char *argv[] = { (char *)binary, "--config", (char *)config_path, NULL };
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    pid_t pid;
    *spawned_ns = now_ns();
    int rc = posix_spawn(&pid, binary, &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    free(notify);
    free(envp);
    if (rc != 0) { errno = rc; return -1; }
    return pid;
}

int cbench_wait_exit(int pid, int timeout_ms) {
    uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ull;
    int status;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) return status;
        if (r < 0 && errno != EINTR) return -1;
        if (now_ns() >= deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        struct timespec ts = { 0, 5000000 };
        nanosleep(&ts, NULL);
    }
}

/* ---- the floor under the daemon's CPU per event ---- */

#include <sys/resource.h>

/* The feeder: compresses every event's message with one deflater (context takeover, as the
   simulator's permessage-deflate does) and writes [u32 length][frame] records to the worker's
   input socket in large writes. Its CPU is not the worker's. */
struct floor_feed {
    int fd; const uint8_t *msgs; const size_t *lens; int nmsgs; int64_t events; int rc;
};

static void *floor_feeder(void *p) {
    struct floor_feed *f = p;
    z_stream z; memset(&z, 0, sizeof z);
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) { f->rc = -1; close(f->fd); return NULL; }
    size_t cap = 1 << 20, used = 0;
    uint8_t *buf = malloc(cap);
    for (int64_t i = 0; i < f->events && f->rc == 0; i++) {
        const uint8_t *m = f->msgs; size_t len = 0;
        int k = (int)(i % f->nmsgs);
        for (int j = 0; j < k; j++) m += f->lens[j];
        len = f->lens[k];
        if (cap - used < len + 64) {
            if (write_full(f->fd, (const char *)buf, used) != 0) { f->rc = -1; break; }
            used = 0;
        }
        z.next_in = (Bytef *)m; z.avail_in = (uInt)len;
        z.next_out = buf + used + 4; z.avail_out = (uInt)(cap - used - 4);
        if (deflate(&z, Z_SYNC_FLUSH) != Z_OK || z.avail_out == 0) { f->rc = -1; break; }
        uint32_t n = (uint32_t)(cap - used - 4 - z.avail_out) - 4;  /* strip 00 00 FF FF */
        memcpy(buf + used, &n, 4);
        used += 4 + n;
    }
    if (f->rc == 0 && used && write_full(f->fd, (const char *)buf, used) != 0) f->rc = -1;
    deflateEnd(&z);
    free(buf);
    shutdown(f->fd, SHUT_WR);
    return NULL;
}

/* XXH64 (seed 0), the daemon's event log record checksum (Sources/SmarticoDaemon/Store/XXH64.swift),
   written from xxHash's specification; cbench_xxh64 is checked against reference digests by the bench. */
static const uint64_t XP1 = 0x9E3779B185EBCA87ULL, XP2 = 0xC2B2AE3D27D4EB4FULL, XP3 = 0x165667B19E3779F9ULL,
                      XP4 = 0x85EBCA77C2B2AE63ULL, XP5 = 0x27D4EB2F165667C5ULL;
static inline uint64_t xrotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static inline uint64_t xround(uint64_t acc, uint64_t lane) { return xrotl(acc + lane * XP2, 31) * XP1; }
static inline uint64_t xmerge(uint64_t acc, uint64_t lane) { return (acc ^ xround(0, lane)) * XP1 + XP4; }
static inline uint64_t xload64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

uint64_t cbench_xxh64(const void *data, size_t len) {
    const uint8_t *p = data, *end = p + len;
    uint64_t acc;
    if (len >= 32) {
        uint64_t v1 = XP1 + XP2, v2 = XP2, v3 = 0, v4 = 0 - XP1;
        const uint8_t *limit = end - 32;
        do {
            v1 = xround(v1, xload64(p)); v2 = xround(v2, xload64(p + 8));
            v3 = xround(v3, xload64(p + 16)); v4 = xround(v4, xload64(p + 24));
            p += 32;
        } while (p <= limit);
        acc = xrotl(v1, 1) + xrotl(v2, 7) + xrotl(v3, 12) + xrotl(v4, 18);
        acc = xmerge(acc, v1); acc = xmerge(acc, v2); acc = xmerge(acc, v3); acc = xmerge(acc, v4);
    } else {
        acc = XP5;
    }
    acc += (uint64_t)len;
    for (; end - p >= 8; p += 8) { acc ^= xround(0, xload64(p)); acc = xrotl(acc, 27) * XP1 + XP4; }
    if (end - p >= 4) { uint32_t w; memcpy(&w, p, 4); acc ^= (uint64_t)w * XP1; acc = xrotl(acc, 23) * XP2 + XP3; p += 4; }
    for (; p < end; p++) { acc ^= (uint64_t)*p * XP5; acc = xrotl(acc, 11) * XP1; }
    acc ^= acc >> 33; acc *= XP2; acc ^= acc >> 29; acc *= XP3; acc ^= acc >> 32;
    return acc;
}

static void *floor_drain(void *p) {
    int fd = *(int *)p;
    char *buf = malloc(1 << 16);
    while (read(fd, buf, 1 << 16) > 0) {}
    free(buf);
    return NULL;
}

static double tv_us(struct timeval t) { return (double)t.tv_sec * 1e6 + (double)t.tv_usec; }

int cbench_event_floor(const uint8_t *msgs, const size_t *msg_lens, int nmsgs, int64_t events, int batch,
                       const char *journal_path, double *user_us, double *sys_us, double *wall_s) {
    int in[2], out[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0) return -1;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, out) != 0) { close(in[0]); close(in[1]); return -1; }
    int jfd = open(journal_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (jfd < 0) { close(in[0]); close(in[1]); close(out[0]); close(out[1]); return -1; }
    size_t maxlen = 0;
    for (int i = 0; i < nmsgs; i++) if (msg_lens[i] > maxlen) maxlen = msg_lens[i];
    struct floor_feed feed = { in[1], msgs, msg_lens, nmsgs, events, 0 };
    pthread_t feeder, drainer;
    pthread_create(&feeder, NULL, floor_feeder, &feed);
    pthread_create(&drainer, NULL, floor_drain, &out[1]);

    z_stream z; memset(&z, 0, sizeof z);
    inflateInit2(&z, -15);
    static const uint8_t tail[4] = { 0, 0, 0xFF, 0xFF };
    size_t icap = 1 << 20, have = 0;
    uint8_t *ibuf = malloc(icap), *msg = malloc(maxlen + 64);
    size_t jcap = (size_t)batch * (maxlen + 128), lcap = (size_t)batch * (2 * maxlen + 256);
    uint8_t *jbuf = malloc(jcap), *lbuf = malloc(lcap);
    size_t jlen = 0, llen = 0; off_t joff = 0;
    int pending = 0, rc = 0;
    int64_t done = 0;
    struct rusage r0, r1;
    uint64_t t0 = now_ns();
    getrusage(RUSAGE_THREAD, &r0);
    while (done < events && rc == 0) {
        ssize_t r = read(in[0], ibuf + have, icap - have);
        if (r <= 0) { if (r < 0 && errno == EINTR) continue; rc = -1; break; }
        have += (size_t)r;
        size_t pos = 0;
        while (have - pos >= 4 && rc == 0) {
            uint32_t n; memcpy(&n, ibuf + pos, 4);
            if (have - pos - 4 < n) break;
            /* inflate one message, context kept across messages */
            z.next_in = ibuf + pos + 4; z.avail_in = n;
            z.next_out = msg; z.avail_out = (uInt)(maxlen + 64);
            int zr = inflate(&z, Z_SYNC_FLUSH);
            z.next_in = (Bytef *)tail; z.avail_in = 4;
            if (zr == Z_OK || zr == Z_BUF_ERROR) zr = inflate(&z, Z_SYNC_FLUSH);
            if (zr != Z_OK && zr != Z_BUF_ERROR) { rc = -2; break; }
            size_t mlen = maxlen + 64 - z.avail_out;
            pos += 4 + n;
            done++;
            /* journal record: seq, ts, length, checksum, then {"message":…,"popup_url":null}; the
               checksum (XXH64's low 32 bits, as the daemon's event log since 2026-11-26) covers the
               record after its header */
            size_t rec = jlen;
            int64_t hdr[4] = { done, (int64_t)t0, (int64_t)mlen, 0 };
            memcpy(jbuf + jlen, hdr, sizeof hdr); jlen += sizeof hdr;
            memcpy(jbuf + jlen, "{\"message\":", 11); jlen += 11;
            memcpy(jbuf + jlen, msg, mlen); jlen += mlen;
            memcpy(jbuf + jlen, ",\"popup_url\":null}", 18); jlen += 18;
            uint32_t sum = (uint32_t)cbench_xxh64(jbuf + rec + sizeof hdr, jlen - rec - sizeof hdr);
            memcpy(jbuf + rec + 3 * sizeof(int64_t), &sum, sizeof sum);
            /* the line: envelope, message, bridge ({"bcid":3, then the message's members) */
            llen += (size_t)snprintf((char *)lbuf + llen, 160, "{\"event\":\"engagement\",\"seq\":%lld,\"ts\":%llu,\"data\":{\"message\":",
                                     (long long)done, (unsigned long long)t0);
            memcpy(lbuf + llen, msg, mlen); llen += mlen;
            memcpy(lbuf + llen, ",\"popup_url\":null,\"bridge\":{\"bcid\":3,", 37); llen += 37;
            memcpy(lbuf + llen, msg + 1, mlen - 1); llen += mlen - 1;
            memcpy(lbuf + llen, "}}\n", 3); llen += 3;
            if (++pending == batch || done == events) {
                /* group commit: one append and one fdatasync, then the lines in one write */
                if (pwrite(jfd, jbuf, jlen, joff) != (ssize_t)jlen || fdatasync(jfd) != 0) { rc = -1; break; }
                joff += (off_t)jlen; jlen = 0;
                if (write_full(out[0], (const char *)lbuf, llen) != 0) { rc = -1; break; }
                llen = 0; pending = 0;
            }
        }
        memmove(ibuf, ibuf + pos, have - pos);
        have -= pos;
    }
    getrusage(RUSAGE_THREAD, &r1);
    *wall_s = (double)(now_ns() - t0) / 1e9;
    *user_us = tv_us(r1.ru_utime) - tv_us(r0.ru_utime);
    *sys_us = tv_us(r1.ru_stime) - tv_us(r0.ru_stime);
    close(in[0]);
    close(out[0]);
    pthread_join(feeder, NULL);
    pthread_join(drainer, NULL);
    close(in[1]); close(out[1]); close(jfd);
    unlink(journal_path);
    inflateEnd(&z);
    free(ibuf); free(msg); free(jbuf); free(lbuf);
    if (rc == 0 && feed.rc != 0) rc = -1;
    return rc;
}

/* ---- the simulator's socket-write stamp ----
   The bench runs smartico-sim in-process, and Transport writes with send(2). This definition of
   send, in the bench's executable, takes the place of libc's for every caller linked into it
   (symbols defined in the executable win over shared libraries'): it notes the time of the first
   send on the calling thread since the last cbench_take_send_stamp, then makes the system call.
   The latency rows use it to start the clock where the C relay's sender starts its own: just
   before the bytes go to the socket, after the simulator has built and compressed the frame. */
#include <sys/syscall.h>

static __thread uint64_t first_send_ns;

ssize_t send(int fd, const void *buf, size_t len, int flags) {
    if (first_send_ns == 0) first_send_ns = now_ns();
    return syscall(SYS_sendto, fd, buf, len, flags, NULL, 0);
}

uint64_t cbench_take_send_stamp(void) {
    uint64_t t = first_send_ns;
    first_send_ns = 0;
    return t;
}
