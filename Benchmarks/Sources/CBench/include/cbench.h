// C references for the benchmarks: what the same work costs written plainly in C.
#ifndef SMARTICO_CBENCH_H
#define SMARTICO_CBENCH_H
#include <stdint.h>
#include <stddef.h>

/// A TCP ping-pong over 127.0.0.1 with TCP_NODELAY: a thread echoes, the caller
/// writes `size` bytes and reads them back `iterations` times (after `warmup`
/// unrecorded ones), storing each round trip in nanoseconds in `rtt_ns`.
/// Returns 0, or -1 with errno set.
int cbench_tcp_pingpong(int iterations, int warmup, int size, uint64_t *rtt_ns);

/// A one-way stream over 127.0.0.1: `conns` TCP connections, the caller's thread writes
/// `msgs_per_conn` messages of `size` bytes to each (one write(2) per message, round robin),
/// a reader thread drains them all with epoll. Stores the time from the first write to the
/// last byte read in `elapsed_ns`. The reference for the simulator's push rate.
/// Returns 0, or -1 with errno set.
int cbench_tcp_stream(int conns, int size, int msgs_per_conn, uint64_t *elapsed_ns);

/// zlib called directly, the way permessage-deflate uses it (raw deflate, sync flush,
/// trailing 00 00 FF FF stripped / re-added, context reset after every message).
typedef struct cbench_zlib cbench_zlib;
cbench_zlib *cbench_deflater_new(int level, int window_bits, int mem_level);
cbench_zlib *cbench_inflater_new(int window_bits);
void cbench_zlib_free(cbench_zlib *z);
/// Compresses one message into `out`; returns its length, or -1 if `cap` is too small.
long cbench_deflate_message(cbench_zlib *z, const uint8_t *in, size_t len, uint8_t *out, size_t cap);
/// Inflates one message (without its stripped tail) into `out`; returns its length, or -1.
long cbench_inflate_message(cbench_zlib *z, const uint8_t *in, size_t len, uint8_t *out, size_t cap);
/// A line receiver on its own thread, for the end-to-end latency rows: it reads
/// newline-terminated lines from `nfds` stream sockets (poll), finds
/// `"engagement_id":N` in each, and stores the CLOCK_MONOTONIC time the line was
/// read in `recv_ns[fd_index * per_fd + (N - id_base)]` (0 = never received; ids
/// outside the window are counted in `stray`). It stops when every socket has
/// delivered `per_fd` stamped lines, one socket closes, or `timeout_ms` passes with
/// nothing to read. Lines longer than 1 MiB are an error.
typedef struct cbench_rx cbench_rx;
cbench_rx *cbench_rx_start(const int *fds, int nfds, int64_t per_fd, int64_t id_base,
                           uint64_t *recv_ns, int timeout_ms);
/// Stamped lines received so far, over all sockets (safe from any thread).
int64_t cbench_rx_count(cbench_rx *rx);
/// Waits for the thread; returns 0 when every socket delivered `per_fd` lines,
/// 1 on timeout, 2 when a socket closed or failed. `stray` gets lines without a
/// usable id. Frees `rx` (the fds stay open).
int cbench_rx_join(cbench_rx *rx, int64_t *stray);

/// The baseline of the end-to-end rows: the same two loopback hops done by a
/// plain C relay. A sender thread writes `in_size`-byte messages (carrying
/// `"engagement_id":N`, N from `id_base`) to the relay over TCP 127.0.0.1 with
/// TCP_NODELAY, paced at `rate` per second (0: as fast as the relay takes them);
/// the relay thread reads each one (blocking) and writes an `out_size`-byte line to
/// each of `subscribers` Unix stream sockets; a `cbench_rx` reads them. Stores the
/// send time of message i in `send_ns[i]` and the receive times like
/// `cbench_rx_start` (`events` per subscriber). Returns 0, or -1 with errno set,
/// or the `cbench_rx_join` status.
int cbench_relay(int subscribers, int64_t events, int rate, int in_size, int out_size,
                 int64_t id_base, uint64_t *send_ns, uint64_t *recv_ns);

/// The same relay made durable: it journals each message before forwarding it, as the daemon
/// must. Group commit on one thread: it waits for a message, takes every complete message already
/// received, appends them with one `pwrite` and one `fdatasync` to `journal_path` (a 4 MiB region
/// written once at the start and then rewritten, like SQLite's WAL between checkpoints), and then
/// writes their lines. No parsing beyond the id, no index, no checkpoint: the physical floor of a
/// journaled relay on this file system. Removes the file afterwards.
int cbench_journaled_relay(int subscribers, int64_t events, int rate, int in_size, int out_size,
                           int64_t id_base, const char *journal_path, uint64_t *send_ns, uint64_t *recv_ns);

/// Monotonic clock in nanoseconds (the same clock on every thread and process).
uint64_t cbench_now_ns(void);

/* The time (cbench_now_ns) of the first send(2) this thread made since the last call, or 0 if
   none; resets it. cbench.c defines send itself to take the stamp (see there). */
uint64_t cbench_take_send_stamp(void);

/// Connects a stream socket to the Unix socket at `path`; returns the fd or -1 (errno).
int cbench_unix_connect(const char *path);
/// Writes all `n` bytes (blocking); 0 or -1.
int cbench_write_all(int fd, const void *buf, size_t n);
/// Reads one line (up to and including `\n`, which is replaced by NUL) byte by byte,
/// so nothing after it is consumed; waits at most `timeout_ms` in all. Returns its
/// length, -1 on error or end of stream, -2 on timeout, -3 when longer than `cap`-1.
long cbench_read_line(int fd, char *buf, size_t cap, int timeout_ms);
/// Binds a datagram Unix socket at `path` (a systemd NOTIFY_SOCKET); fd or -1.
int cbench_notify_bind(const char *path);
/// Waits up to `timeout_ms` for a datagram containing `READY=1` on `fd` (other
/// datagrams are skipped); returns the CLOCK_MONOTONIC time it arrived, 0 on timeout.
uint64_t cbench_notify_wait_ready(int fd, int timeout_ms);
/// Starts `binary --config config_path` with stdout and stderr appended to
/// `log_path`, the environment of this process plus `NOTIFY_SOCKET=notify_socket`
/// when it is not NULL. Stores the time just before posix_spawn in `spawned_ns`.
/// Returns the pid, or -1 (errno).
int cbench_spawn_daemon(const char *binary, const char *config_path, const char *notify_socket,
                        const char *log_path, uint64_t *spawned_ns);
/// Waits up to `timeout_ms` for `pid` to exit (polling waitpid with WNOHANG);
/// returns its wait status, or -1 on timeout (the child is then killed with SIGKILL and reaped).
int cbench_wait_exit(int pid, int timeout_ms);


/// The floor under the daemon's CPU per event: the least work any design that journals
/// before it shows must do, written plainly in C on one thread. A feeder thread compresses
/// the messages (`nmsgs` back to back in `msgs`, cycled for `events` events) with one
/// raw-deflate context (context takeover, as the simulator does) and streams them over a
/// socketpair; the measured thread reads them in large reads, inflates each, appends a
/// journal record (`{"message":…,"popup_url":null}`, checksummed with XXH64) to `journal_path` and builds the
/// subscriber line (envelope, message, bridge) by copying; every `batch` events it writes
/// the records with one pwrite, `fdatasync`s, and writes the lines with one write to a
/// socket drained by another thread. No JSON parsing or validation at all. Stores the
/// measured thread's user and system CPU (µs, getrusage RUSAGE_THREAD) and the wall time.
/// Returns 0, -1 with errno set, or -2 when inflate fails. The journal file is removed.
int cbench_event_floor(const uint8_t *msgs, const size_t *msg_lens, int nmsgs, int64_t events, int batch,
                       const char *journal_path, double *user_us, double *sys_us, double *wall_s);

/// XXH64 with seed 0: the checksum the floor puts in its journal records, as the daemon's event log.
uint64_t cbench_xxh64(const void *data, size_t len);

#endif
