#if canImport(Glibc)
import Glibc
#endif

/// Bytes waiting for a socket to become writable: a list of owned chunks (small writes are coalesced into
/// the tail chunk), flushed with one `sendmsg` of up to 64 iovecs. Loop thread only.
final class WriteQueue {
    private struct Chunk {
        var storage: UnsafeMutableRawBufferPointer
        var start: Int
        var end: Int
        var count: Int { end - start }
        var spare: Int { storage.count - end }
    }

    private var chunks: [Chunk] = []
    private var head = 0
    /// Bytes queued.
    private(set) var byteCount = 0
    private static let minimumChunk = 16 * 1024
    private static let maxIOVecs = 64

    var isEmpty: Bool { byteCount == 0 }

    deinit { removeAll() }

    func append(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        var source = bytes
        if head < chunks.count, chunks[chunks.count - 1].spare > 0 {
            let last = chunks.count - 1
            let n = min(chunks[last].spare, source.count)
            UnsafeMutableRawBufferPointer(rebasing: chunks[last].storage[chunks[last].end..<chunks[last].end + n])
                .copyMemory(from: UnsafeRawBufferPointer(rebasing: source[0..<n]))
            chunks[last].end += n
            byteCount += n
            source = UnsafeRawBufferPointer(rebasing: source[n...])
        }
        guard source.count > 0 else { return }
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: max(source.count, WriteQueue.minimumChunk), alignment: 8)
        storage.copyMemory(from: source)
        chunks.append(Chunk(storage: storage, start: 0, end: source.count))
        byteCount += source.count
    }

    /// Sends as much as the socket takes. Returns 0 on progress or EAGAIN, or the errno of a failure.
    func flush(fd: Int32) -> Int32 {
        while byteCount > 0 {
            let n = min(chunks.count - head, WriteQueue.maxIOVecs)
            let sent = withUnsafeTemporaryAllocation(of: iovec.self, capacity: n) { iov in
                for i in 0..<n {
                    let c = chunks[head + i]
                    iov[i] = iovec(iov_base: c.storage.baseAddress! + c.start, iov_len: c.count)
                }
                var message = msghdr()
                message.msg_iov = iov.baseAddress
                message.msg_iovlen = n
                return sendmsg(fd, &message, Int32(MSG_NOSIGNAL))
            }
            if sent < 0 {
                let e = errno
                if e == EINTR { continue }
                if e == EAGAIN || e == EWOULDBLOCK { return 0 }
                return e
            }
            consume(sent)
            if sent == 0 { return 0 }
        }
        return 0
    }

    private func consume(_ count: Int) {
        var left = count
        byteCount -= count
        while left > 0 {
            let available = chunks[head].count
            if left >= available {
                left -= available
                chunks[head].storage.deallocate()
                head += 1
            } else {
                chunks[head].start += left
                left = 0
            }
        }
        if head == chunks.count {
            chunks.removeAll(keepingCapacity: chunks.count <= 64)
            head = 0
        } else if head > 32 && head * 2 > chunks.count {
            chunks.removeFirst(head)
            head = 0
        }
    }

    func removeAll() {
        for i in head..<chunks.count { chunks[i].storage.deallocate() }
        chunks.removeAll()
        head = 0
        byteCount = 0
    }
}
