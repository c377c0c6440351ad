import COpenSSL  // smartico_set_thread_name
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Why `user.hash_command` gave no hash. Descriptions name the program and what happened,
/// with a short excerpt of its stderr; they never contain its stdout (the hash is a secret).
public enum HashCommandError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `user.hash_command` is an empty array.
    case emptyCommand
    /// `posix_spawnp` failed (e.g. ENOENT: no such program on PATH).
    case spawnFailed(program: String, errno: Int32)
    /// A pipe or poll call failed.
    case ioFailed(program: String, operation: String, errno: Int32)
    /// The program exited with a non-zero status.
    case exited(program: String, status: Int32, stderr: String)
    /// The program was killed by a signal.
    case signaled(program: String, signal: Int32, stderr: String)
    /// The program did not finish within the timeout; its process group was killed.
    case timedOut(program: String, timeoutMs: Int)
    /// The program exited 0 but its first stdout line is empty.
    case noOutput(program: String, stderr: String)

    public var description: String {
        func tail(_ s: String) -> String { s.isEmpty ? "" : "; stderr: \(s)" }
        switch self {
        case .emptyCommand: return "user.hash_command is empty"
        case .spawnFailed(let p, let e): return "cannot start \"\(p)\": \(String(cString: strerror(e))) (errno \(e))"
        case .ioFailed(let p, let op, let e): return "\(op) failed while running \"\(p)\": \(String(cString: strerror(e))) (errno \(e))"
        case .exited(let p, let s, let err): return "\"\(p)\" exited with status \(s)\(tail(err))"
        case .signaled(let p, let sig, let err): return "\"\(p)\" was killed by signal \(sig)\(tail(err))"
        case .timedOut(let p, let ms): return "\"\(p)\" did not finish within \(ms) ms and was killed"
        case .noOutput(let p, let err): return "\"\(p)\" printed no hash (its first stdout line is empty)\(tail(err))"
        }
    }
}

/// Runs `user.hash_command`: argv without a shell (`posix_spawnp`, searched on `PATH`), stdin
/// from `/dev/null`, `SMARTICO_EXT_USER_ID` set to the user, in its own process group. The
/// first stdout line (trailing `\r` and blanks removed) is the hash. The command must exit 0
/// within the timeout (default 10 s); otherwise its whole process group is killed with SIGKILL.
///
/// Every blocking call (poll, read, waitpid) runs on a dedicated thread created per run.
public enum HashCommandRunner {
    public static let defaultTimeoutMs = 10_000
    /// Bytes of stdout kept (a hash is short; the rest is drained and dropped).
    static let maxStdout = 64 * 1024
    /// Bytes of stderr kept for the error message.
    static let maxStderr = 2 * 1024
    /// The environment variable that tells the command whose hash to print.
    public static let userVariable = "SMARTICO_EXT_USER_ID"

    /// Runs the command and returns its outcome without blocking the caller's thread.
    public static func run(argv: [String], user: String?, timeoutMs: Int = defaultTimeoutMs) async -> HashCommandOutcome {
        await withCheckedContinuation { continuation in
            start(argv: argv, user: user, timeoutMs: timeoutMs) { continuation.resume(returning: $0) }
        }
    }

    /// The name of the thread a run uses.
    public static let threadName = "smarticod-hash"

    /// The commands running now, by pid (= their process group). A pid leaves the set in the same
    /// critical section that reaps it, so `killRunning()` never signals a pid that was reaped
    /// (and may have been reused).
    private static let running = Mutex<Set<pid_t>>([])

    /// Kills the process group of every command still running; returns how many. The daemon
    /// calls it when it stops, so no hash command outlives it (each run then ends as killed by
    /// signal 9, an outcome no one waits for any more).
    @discardableResult
    public static func killRunning() -> Int {
        running.withLock { pids in
            for pid in pids { killGroup(pid) }
            return pids.count
        }
    }

    /// How many commands are running (tests).
    static var runningCount: Int { running.withLock { $0.count } }

    /// Runs the command on a new detached pthread (named ``threadName``) and calls
    /// `completion` there with the outcome.
    public static func start(argv: [String], user: String?, timeoutMs: Int = defaultTimeoutMs,
                             completion: @escaping @Sendable (HashCommandOutcome) -> Void) {
        let job = Unmanaged.passRetained(Job(argv: argv, user: user, timeoutMs: timeoutMs, completion: completion))
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { context in
            let job = Unmanaged<Job>.fromOpaque(context!).takeRetainedValue()
            _ = smartico_set_thread_name(HashCommandRunner.threadName)
            job.completion(HashCommandRunner.runBlocking(argv: job.argv, user: job.user, timeoutMs: job.timeoutMs))
            return nil
        }, job.toOpaque())
        if rc == 0 {
            pthread_detach(thread)
        } else {
            job.release()
            completion(.failed(.ioFailed(program: argv.first ?? "", operation: "pthread_create", errno: rc)))
        }
    }

    /// What the runner thread needs; immutable, so handing it to the new thread is safe.
    final class Job: Sendable {
        let argv: [String]
        let user: String?
        let timeoutMs: Int
        let completion: @Sendable (HashCommandOutcome) -> Void

        init(argv: [String], user: String?, timeoutMs: Int, completion: @escaping @Sendable (HashCommandOutcome) -> Void) {
            self.argv = argv
            self.user = user
            self.timeoutMs = timeoutMs
            self.completion = completion
        }
    }

    /// The blocking implementation (call it only on a thread of your own).
    static func runBlocking(argv: [String], user: String?, timeoutMs: Int) -> HashCommandOutcome {
        guard let program = argv.first, !program.isEmpty else { return .failed(.emptyCommand) }
        var outPipe: [Int32] = [-1, -1]
        var errPipe: [Int32] = [-1, -1]
        // pipe2 is not exported by Glibc's module map; set FD_CLOEXEC right after pipe().
        guard makePipe(&outPipe) == 0 else { return .failed(.ioFailed(program: program, operation: "pipe", errno: errno)) }
        guard makePipe(&errPipe) == 0 else {
            let e = errno
            close(outPipe[0]); close(outPipe[1])
            return .failed(.ioFailed(program: program, operation: "pipe", errno: e))
        }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)

        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        posix_spawnattr_setpgroup(&attr, 0)
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attr, &noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for s in [SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD] { sigaddset(&defaults, s) }
        posix_spawnattr_setsigdefault(&attr, &defaults)

        var env: [String] = []
        var p = environ
        while let entry = p.pointee {
            let s = String(cString: entry)
            if !s.hasPrefix(userVariable + "=") { env.append(s) }
            p += 1
        }
        if let user { env.append("\(userVariable)=\(user)") }

        var cArgs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        var cEnv: [UnsafeMutablePointer<CChar>?] = env.map { strdup($0) } + [nil]
        defer {
            for p in cArgs { free(p) }
            for p in cEnv { free(p) }
        }
        var pid: pid_t = 0
        let rc = posix_spawnp(&pid, program, &actions, &attr, &cArgs, &cEnv)
        close(outPipe[1])
        close(errPipe[1])
        guard rc == 0 else {
            close(outPipe[0]); close(errPipe[0])
            return .failed(.spawnFailed(program: program, errno: rc))
        }
        running.withLock { _ = $0.insert(pid) }
        defer { close(outPipe[0]); close(errPipe[0]) }

        let deadline = monotonicMs() + Int64(timeoutMs)
        var stdout: [UInt8] = []
        var stderr: [UInt8] = []
        var open = [true, true]
        var buffer = [UInt8](repeating: 0, count: 4096)
        var timedOut = false
        var status: Int32 = 0

        while open[0] || open[1] {
            let remaining = deadline - monotonicMs()
            if remaining <= 0 { timedOut = true; break }
            var fds: [pollfd] = []
            var which: [Int] = []
            if open[0] { fds.append(pollfd(fd: outPipe[0], events: Int16(POLLIN), revents: 0)); which.append(0) }
            if open[1] { fds.append(pollfd(fd: errPipe[0], events: Int16(POLLIN), revents: 0)); which.append(1) }
            let n = poll(&fds, nfds_t(fds.count), Int32(min(remaining, Int64(Int32.max))))
            if n < 0 {
                if errno == EINTR { continue }
                let e = errno
                killAndReap(pid, &status)
                return .failed(.ioFailed(program: program, operation: "poll", errno: e))
            }
            for (k, f) in fds.enumerated() where f.revents != 0 {
                let got = buffer.withUnsafeMutableBytes { read(f.fd, $0.baseAddress, $0.count) }
                if got > 0 {
                    if which[k] == 0 {
                        if stdout.count < maxStdout { stdout.append(contentsOf: buffer[0..<min(got, maxStdout - stdout.count)]) }
                    } else if stderr.count < maxStderr {
                        stderr.append(contentsOf: buffer[0..<min(got, maxStderr - stderr.count)])
                    }
                } else if got == 0 || (errno != EINTR && errno != EAGAIN) {
                    open[which[k]] = false
                }
            }
        }

        if !timedOut {
            // The pipes are closed; the program normally exits at once. Wait within the deadline.
            while true {
                let (r, e) = running.withLock { pids -> (pid_t, Int32) in
                    let r = waitpid(pid, &status, WNOHANG)
                    let e = errno
                    if r == pid || (r < 0 && e != EINTR) { pids.remove(pid) }
                    return (r, e)
                }
                if r == pid { break }
                if r < 0 && e != EINTR { break }
                if monotonicMs() >= deadline { timedOut = true; break }
                usleep(5_000)
            }
        }
        if timedOut {
            killAndReap(pid, &status)
            return .failed(.timedOut(program: program, timeoutMs: timeoutMs))
        }

        let errText = excerpt(stderr)
        let termSignal = status & 0x7f
        if termSignal != 0 { return .failed(.signaled(program: program, signal: termSignal, stderr: errText)) }
        let exitStatus = (status >> 8) & 0xff
        guard exitStatus == 0 else { return .failed(.exited(program: program, status: exitStatus, stderr: errText)) }
        let firstLine = stdout.split(separator: UInt8(ascii: "\n"), maxSplits: 1, omittingEmptySubsequences: false).first ?? []
        var line = Array(firstLine)
        while let last = line.last, last == 0x0D || last == 0x20 || last == 0x09 { line.removeLast() }
        while let first = line.first, first == 0x20 || first == 0x09 { line.removeFirst() }
        guard !line.isEmpty else { return .failed(.noOutput(program: program, stderr: errText)) }
        return .hash(Secret(String(decoding: line, as: UTF8.self)))
    }


    static func makePipe(_ fds: inout [Int32]) -> Int32 {
        guard pipe(&fds) == 0 else { return -1 }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        return 0
    }

    /// Kills the command's process group and reaps it (SIGKILL cannot be caught: the wait is short).
    static func killAndReap(_ pid: pid_t, _ status: inout Int32) {
        running.withLock { pids in
            killGroup(pid)
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            pids.remove(pid)
        }
    }

    static func killGroup(_ pid: pid_t) {
        kill(-pid, SIGKILL)
        kill(pid, SIGKILL)
    }

    static func monotonicMs() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    /// A printable one-line excerpt of stderr (at most 300 characters).
    static func excerpt(_ bytes: [UInt8]) -> String {
        let text = String(decoding: bytes, as: UTF8.self)
        var out = ""
        for ch in text.unicodeScalars {
            if out.unicodeScalars.count >= 300 { out += "…"; break }
            out.unicodeScalars.append(ch.value < 0x20 || ch.value == 0x7F ? " " : ch)
        }
        return out.trimmingBlanks()
    }
}
