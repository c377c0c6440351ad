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

#endif
