// Why tsan.supp suppresses races inside Mutex.withLock bodies: this correct program (two threads
// appending to one array, always under one Synchronization.Mutex) gets a ThreadSanitizer report on
// Linux, because the Mutex's lock and unlock run in the uninstrumented standard library.
//
//   swiftc -swift-version 6 -sanitize=thread -g Tests/sanitizers/tsan-mutex-repro.swift -o /tmp/repro
//   SWIFT_BACKTRACE=enable=no /tmp/repro                      # WARNING: ThreadSanitizer: Swift access race
//   SWIFT_BACKTRACE=enable=no TSAN_OPTIONS=suppressions=Tests/sanitizers/tsan.supp:print_suppressions=1 /tmp/repro
//                                                             # no warning; "race:zYuYTXE" matched
//
// Not part of any target (Package.swift builds nothing under Tests/sanitizers).
import Synchronization
import Glibc

final class Box: @unchecked Sendable {
    struct S { var tasks: [Int] = []; var flag = false }
    let m = Mutex(S())
}
nonisolated func work(_ arg: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    let b = Unmanaged<Box>.fromOpaque(arg!).takeRetainedValue()
    for i in 0..<20000 {
        b.m.withLock { s in s.tasks.append(i); if s.tasks.count > 100 { s.tasks.removeAll() }; s.flag.toggle() }
    }
    return nil
}
nonisolated func run() {
    let box = Box()
    var threads: [pthread_t] = []
    for _ in 0..<2 {
        var t = pthread_t()
        pthread_create(&t, nil, { work($0) }, Unmanaged.passRetained(box).toOpaque())
        threads.append(t)
    }
    for t in threads { pthread_join(t, nil) }
    print("done", box.m.withLock { $0.tasks.count })
}
run()
