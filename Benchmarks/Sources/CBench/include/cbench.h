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

#endif
