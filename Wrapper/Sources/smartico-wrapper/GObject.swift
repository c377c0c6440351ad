#if canImport(Glibc)
import Glibc
#endif
import CWebKitGTK

// The few conversions the C API needs: GTK's struct pointers are typed, GObject's signals take
// untyped instances and C function pointers. Every callback in this executable runs on the main
// thread, in GLib's main loop.

@inline(__always) func cast<T>(_ p: UnsafeMutableRawPointer?) -> UnsafeMutablePointer<T>? {
    p?.assumingMemoryBound(to: T.self)
}

@inline(__always) func cast<T, U>(_ p: UnsafeMutablePointer<U>?) -> UnsafeMutablePointer<T>? {
    p.map { UnsafeMutableRawPointer($0).assumingMemoryBound(to: T.self) }
}

@inline(__always) func raw<T>(_ p: UnsafeMutablePointer<T>?) -> UnsafeMutableRawPointer? {
    p.map { UnsafeMutableRawPointer($0) }
}

/// Connects a C function to a GObject signal.
@discardableResult
func connect<F>(_ instance: UnsafeMutableRawPointer?, _ signal: String, _ handler: F, tag: Int = 0) -> UInt {
    smw_connect(instance, signal, unsafeBitCast(handler, to: GCallback.self), UnsafeMutableRawPointer(bitPattern: tag))
}

/// A C string from GLib that the caller owns: copied, then freed.
func takeString(_ p: UnsafeMutablePointer<CChar>?) -> String? {
    guard let p else { return nil }
    defer { g_free(p) }
    return String(cString: p)
}

/// Monotonic milliseconds (GLib's clock, the one its timers use).
func monotonicMs() -> Int64 { Int64(g_get_monotonic_time()) / 1000 }

/// A closure to run once on the main thread.
private final class MainCall: Sendable {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}

/// Runs `body` on the main thread, from the main loop (safe from any thread).
func onMain(_ body: @escaping @Sendable () -> Void) {
    let call = Unmanaged.passRetained(MainCall(body)).toOpaque()
    let run: @convention(c) (UnsafeMutableRawPointer?) -> Int32 = { data in
        let call = Unmanaged<MainCall>.fromOpaque(data!).takeRetainedValue()
        call.body()
        return 0  // G_SOURCE_REMOVE
    }
    g_idle_add_full(Int32(G_PRIORITY_DEFAULT), run, call, nil)
}

/// One timer of the main loop, rescheduled or cancelled at will.
final class MainTimer {
    private var source: UInt32 = 0
    private let body: () -> Void

    init(_ body: @escaping () -> Void) { self.body = body }

    var isScheduled: Bool { source != 0 }

    func schedule(afterMs ms: Int64) {
        cancel()
        let fire: @convention(c) (UnsafeMutableRawPointer?) -> Int32 = { data in
            let timer = Unmanaged<MainTimer>.fromOpaque(data!).takeUnretainedValue()
            timer.source = 0
            timer.body()
            return 0
        }
        source = g_timeout_add_full(Int32(G_PRIORITY_DEFAULT), UInt32(clamping: max(ms, 0)), fire,
                                    Unmanaged.passUnretained(self).toOpaque(), nil)
    }

    func cancel() {
        if source != 0 { g_source_remove(source) }
        source = 0
    }

    deinit { cancel() }
}

@inline(__always) func raw(_ p: OpaquePointer?) -> UnsafeMutableRawPointer? {
    p.map { UnsafeMutableRawPointer($0) }
}

@inline(__always) func cast<T>(_ p: OpaquePointer?) -> UnsafeMutablePointer<T>? {
    p.map { UnsafeMutablePointer<T>($0) }
}

@inline(__always) func opaque(_ p: UnsafeMutableRawPointer?) -> OpaquePointer? {
    p.map { OpaquePointer($0) }
}

@inline(__always) func opaque<T>(_ p: UnsafeMutablePointer<T>?) -> OpaquePointer? {
    p.map { OpaquePointer($0) }
}

/// Writes to stderr with one `write(2)` (a whole line at once; no shared `FILE *`).
func writeStderr(_ text: String) {
    var bytes = Array(text.utf8)
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress! + offset, $0.count - offset) }
        if n <= 0 { if errno == EINTR { continue }; return }
        offset += n
    }
}
