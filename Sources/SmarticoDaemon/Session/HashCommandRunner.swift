import COpenSSL  // smartico_set_thread_name
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Why `user.hash_command` gave no hash. Descriptions name the program and what happened (exit
/// status, signal, timeout, no output) and nothing the program printed: they go into `error`
/// events every subscriber sees. Its stdout (the hash) is never kept; a short excerpt of its
/// stderr is, in ``stderrExcerpt``, for the daemon's debug log only (masked:
/// ``HashCommandRunner/masked(_:)``).
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
        switch self {
        case .emptyCommand: return "user.hash_command is empty"
        case .spawnFailed(let p, let e): return "cannot start \"\(p)\": \(String(cString: strerror(e))) (errno \(e))"
        case .ioFailed(let p, let op, let e): return "\(op) failed while running \"\(p)\": \(String(cString: strerror(e))) (errno \(e))"
        case .exited(let p, let s, let err): return "\"\(p)\" exited with status \(s)\(stderrNote(err))"
        case .signaled(let p, let sig, let err): return "\"\(p)\" was killed by signal \(sig)\(stderrNote(err))"
        case .timedOut(let p, let ms): return "\"\(p)\" did not finish within \(ms) ms and was killed"
        case .noOutput(let p, let err): return "\"\(p)\" printed no hash (its first stdout line is empty)\(stderrNote(err))"
        }
    }

    /// Where the stderr went, when there was some (never what it said).
    private func stderrNote(_ stderr: String) -> String {
        stderr.isEmpty ? "" : "; its stderr is in the daemon's log at debug level"
    }

    /// The start of what the program wrote to stderr (at most 300 characters, control characters
    /// kept: the log handler escapes them), or "" when nothing or not applicable. Not masked: log
    /// it through ``HashCommandRunner/masked(_:)``.
    public var stderrExcerpt: String {
        switch self {
        case .exited(_, _, let err), .signaled(_, _, let err), .noOutput(_, let err): return err
        case .emptyCommand, .spawnFailed, .ioFailed, .timedOut: return ""
        }
    }
}

/// Runs `user.hash_command`: argv without a shell (`posix_spawnp`, searched on `PATH`), stdin
/// from `/dev/null`, in its own process group, with a minimal environment
/// (``childEnvironment(user:daemonEnvironment:passing:)``: `PATH`, `LANG`,
/// `SMARTICO_EXT_USER_ID` and the variables `user.hash_command_env` names). The first stdout
/// line (trailing `\r` and blanks removed) is the hash. The command must exit 0 within the
/// timeout (default 10 s); otherwise its whole process group is killed with SIGKILL.
///
/// A descendant that leaves the process group (`setsid`, a double fork) is not reached by the
/// group's kill. The daemon calls ``adoptOrphans()`` at start: it becomes a child subreaper, so
/// such a process, once its parent is gone, is reparented to the daemon instead of init; when a
/// run ends and no other command is running or starting, every child of the daemon that is not a
/// running command is such a leftover, and is killed and reaped (``sweepOrphans()``), until none
/// is left. So nothing a hash command started outlives its run, whether it timed out, failed or
/// succeeded (docs/security.md, "Hash commands").
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
    /// `PATH` for the command when the daemon has none.
    public static let defaultPath = "/usr/local/bin:/usr/bin:/bin"

    /// The command's whole environment, as `NAME=value` strings sorted by name: `PATH` (the
    /// daemon's, or ``defaultPath``), `LANG` when the daemon has it, the variables named in
    /// `passing` (`user.hash_command_env`) that the daemon has, and ``userVariable`` set to
    /// `user` (when there is one; never taken from the daemon's environment).
    public static func childEnvironment(user: String?, daemonEnvironment: [String: String], passing: [String]) -> [String] {
        var env: [String: String] = ["PATH": daemonEnvironment["PATH"] ?? defaultPath]
        for name in ["LANG"] + passing where name != userVariable {
            if let value = daemonEnvironment[name] { env[name] = value }
        }
        if let user { env[userVariable] = user }
        return env.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
    }

    /// Runs the command and returns its outcome without blocking the caller's thread.
    /// `environment`: the daemon's environment, of which the command gets only what
    /// ``childEnvironment(user:daemonEnvironment:passing:)`` keeps; `passing`:
    /// `user.hash_command_env`.
    public static func run(argv: [String], user: String?, environment: [String: String] = [:], passing: [String] = [],
                           timeoutMs: Int = defaultTimeoutMs) async -> HashCommandOutcome {
        await withCheckedContinuation { continuation in
            start(argv: argv, user: user, environment: environment, passing: passing, timeoutMs: timeoutMs) {
                continuation.resume(returning: $0)
            }
        }
    }

    /// The name of the thread a run uses.
    public static let threadName = "smarticod-hash"

    /// The daemon's children as the runner knows them.
    struct Children {
        /// The commands running now, by pid (= their process group). A pid leaves the set in the
        /// same critical section that reaps it, so `killRunning()` never signals a pid that was
        /// reaped (and may have been reused).
        var running: Set<pid_t> = []
        /// `posix_spawnp` calls under way: their pid is not in `running` yet.
        var spawning = 0
        /// Whether leftovers are swept (``adoptOrphans()`` made the process a subreaper).
        var sweeping = false
    }

    private static let children = Mutex(Children())

    /// Makes the process a child subreaper, so that what a hash command leaves behind outside its
    /// process group comes back to it and is killed when the run ends. Call it only in a process
    /// whose only children are hash commands (the daemon: ``sweepOrphans()`` kills every other
    /// child). Returns nil, or why it failed (the runner then kills process groups only).
    public static func adoptOrphans() -> String? {
        guard smartico_set_child_subreaper() == 0 else {
            return "prctl(PR_SET_CHILD_SUBREAPER): \(String(cString: strerror(errno)))"
        }
        children.withLock { $0.sweeping = true }
        return nil
    }

    /// Kills the process group of every command still running; returns how many. The daemon
    /// calls it when it stops, so no hash command outlives it (each run then ends as killed by
    /// signal 9, an outcome no one waits for any more).
    @discardableResult
    public static func killRunning() -> Int {
        children.withLock { c in
            for pid in c.running { killGroup(pid) }
            return c.running.count
        }
    }

    /// How many commands are running (tests).
    static var runningCount: Int { children.withLock { $0.running.count } }

    /// How long ``sweepOrphans()`` keeps killing and reaping leftovers.
    static let sweepLimitMs: Int64 = 2_000

    /// After ``adoptOrphans()``: kills (SIGKILL) and reaps every child of this process that is not
    /// a running command, round after round (a killed leftover's own children come back to this
    /// process when it dies), until none is left or ``sweepLimitMs`` passed. Nothing is done
    /// while a command runs or is being started (its own leftovers could not be told apart: the
    /// last run to end sweeps). Returns how many leftovers were killed. Blocking: the runner's
    /// thread only.
    ///
    /// Only this function reaps a child that is not in `running`, and only under the lock, so a
    /// pid it found is still that child when it signals it (a pid is not reused before its
    /// parent reaps it).
    @discardableResult
    static func sweepOrphans() -> Int {
        let deadline = monotonicMs() + sweepLimitMs
        var killed: Set<pid_t> = []
        while true {
            let found = children.withLock { c -> Bool in
                guard c.sweeping, c.running.isEmpty, c.spawning == 0 else { return false }
                let leftovers = childPids()
                for pid in leftovers {
                    kill(pid, SIGKILL)
                    killed.insert(pid)
                }
                var status: Int32 = 0
                for pid in leftovers { _ = waitpid(pid, &status, WNOHANG) }
                return !leftovers.isEmpty
            }
            if !found || monotonicMs() >= deadline { return killed.count }
            usleep(2_000)
        }
    }

    /// The pids whose parent is this process (from `/proc/<pid>/stat`). Blocking.
    static func childPids() -> [pid_t] {
        let me = getpid()
        guard let dir = opendir("/proc") else { return [] }
        defer { closedir(dir) }
        var out: [pid_t] = []
        var buffer = [UInt8](repeating: 0, count: 512)
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            guard let pid = pid_t(name), pid != me else { continue }
            let fd = open("/proc/\(name)/stat", O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { continue }
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            close(fd)
            guard n > 0 else { continue }
            // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so from the last ')'.
            guard let paren = buffer[..<n].lastIndex(of: UInt8(ascii: ")")) else { continue }
            let fields = buffer[(paren + 1)..<n].split(separator: UInt8(ascii: " "))
            if fields.count >= 2, let ppid = pid_t(String(decoding: fields[1], as: UTF8.self)), ppid == me {
                out.append(pid)
            }
        }
        return out
    }

    /// Runs the command on a new detached pthread (named ``threadName``) and calls
    /// `completion` there with the outcome. `environment` and `passing`: as for
    /// ``run(argv:user:environment:passing:timeoutMs:)``.
    public static func start(argv: [String], user: String?, environment: [String: String] = [:], passing: [String] = [],
                             timeoutMs: Int = defaultTimeoutMs,
                             completion: @escaping @Sendable (HashCommandOutcome) -> Void) {
        let env = childEnvironment(user: user, daemonEnvironment: environment, passing: passing)
        let job = Unmanaged.passRetained(Job(argv: argv, environment: env, timeoutMs: timeoutMs, completion: completion))
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { context in
            let job = Unmanaged<Job>.fromOpaque(context!).takeRetainedValue()
            _ = smartico_set_thread_name(HashCommandRunner.threadName)
            job.completion(HashCommandRunner.runBlocking(argv: job.argv, environment: job.environment, timeoutMs: job.timeoutMs))
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
        let environment: [String]
        let timeoutMs: Int
        let completion: @Sendable (HashCommandOutcome) -> Void

        init(argv: [String], environment: [String], timeoutMs: Int, completion: @escaping @Sendable (HashCommandOutcome) -> Void) {
            self.argv = argv
            self.environment = environment
            self.timeoutMs = timeoutMs
            self.completion = completion
        }
    }

    /// The blocking implementation (call it only on a thread of your own). `environment`: the
    /// command's whole environment (`NAME=value`). What the command left behind is killed before
    /// it returns (``sweepOrphans()``).
    static func runBlocking(argv: [String], environment env: [String], timeoutMs: Int) -> HashCommandOutcome {
        let outcome = runOnce(argv: argv, environment: env, timeoutMs: timeoutMs)
        sweepOrphans()
        return outcome
    }

    private static func runOnce(argv: [String], environment env: [String], timeoutMs: Int) -> HashCommandOutcome {
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

        var cArgs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        var cEnv: [UnsafeMutablePointer<CChar>?] = env.map { strdup($0) } + [nil]
        defer {
            for p in cArgs { free(p) }
            for p in cEnv { free(p) }
        }
        var pid: pid_t = 0
        // Counted while under way, so that no sweep takes the new child for a leftover.
        children.withLock { $0.spawning += 1 }
        let rc = posix_spawnp(&pid, program, &actions, &attr, &cArgs, &cEnv)
        children.withLock { c in
            c.spawning -= 1
            if rc == 0 { c.running.insert(pid) }
        }
        close(outPipe[1])
        close(errPipe[1])
        guard rc == 0 else {
            close(outPipe[0]); close(errPipe[0])
            return .failed(.spawnFailed(program: program, errno: rc))
        }
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
                let (r, e) = children.withLock { c -> (pid_t, Int32) in
                    let r = waitpid(pid, &status, WNOHANG)
                    let e = errno
                    if r == pid || (r < 0 && e != EINTR) { c.running.remove(pid) }
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
        children.withLock { c in
            killGroup(pid)
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            c.running.remove(pid)
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

    /// The start of stderr: at most 300 characters, leading and trailing blanks and line breaks
    /// removed. Control characters stay (the log handler escapes them).
    static func excerpt(_ bytes: [UInt8]) -> String {
        let all = String(decoding: bytes, as: UTF8.self).unicodeScalars
        var out = Array(all.prefix(300))
        let cut = out.count == 300 && all.count > 300
        func blankOrBreak(_ s: Unicode.Scalar) -> Bool { isBlank(s) || s == "\n" || s == "\r" }
        while let last = out.last, blankOrBreak(last) { out.removeLast() }
        while let first = out.first, blankOrBreak(first) { out.removeFirst() }
        return String(String.UnicodeScalarView(out)) + (cut ? "…" : "")
    }

    /// Bytes of a stderr excerpt kept by ``masked(_:)``.
    public static let maskedMaxBytes = 300

    /// A stderr excerpt fit for the daemon's debug log: cut to ``maskedMaxBytes`` bytes, then
    /// - everything after a `hash`, `secret`, `token`, `key` or `password` (any case, also inside
    ///   a longer word such as `api_key`) followed by `=` or `:` is replaced by `***`;
    /// - every run of 16 or more characters from `A–Z a–z 0–9 + / = _ -` that contains a digit
    ///   (a hex digest, a base64 token) is replaced by `***`.
    ///
    /// Control characters are left to the log handler, which escapes them.
    public static func masked(_ text: String) -> String {
        var scalars: [Unicode.Scalar] = []
        var bytes = 0
        var cut = false
        for s in text.unicodeScalars {
            bytes += UTF8.width(s)
            if bytes > maskedMaxBytes { cut = true; break }
            scalars.append(s)
        }
        // The keyword rule: keep through the first `keyword =`/`keyword :`, drop the rest.
        let lower = scalars.map { ("A"..."Z").contains($0) ? Unicode.Scalar($0.value + 0x20)! : $0 }
        let keywords: [[Unicode.Scalar]] = ["password", "secret", "token", "hash", "key"].map { Array($0.unicodeScalars) }
        var end = scalars.count
        var secretFollows = false
        search: for i in scalars.indices {
            for word in keywords where i + word.count <= lower.count && Array(lower[i..<(i + word.count)]) == word {
                var j = i + word.count
                while j < scalars.count, scalars[j] == " " || scalars[j] == "\t" { j += 1 }
                if j < scalars.count, scalars[j] == "=" || scalars[j] == ":" {
                    end = j + 1
                    secretFollows = true
                    break search
                }
            }
        }
        // The run rule, on what is kept.
        func runScalar(_ s: Unicode.Scalar) -> Bool {
            s.isASCII && (("A"..."Z").contains(s) || ("a"..."z").contains(s) || ("0"..."9").contains(s) || "+/=_-".unicodeScalars.contains(s))
        }
        var out = String.UnicodeScalarView()
        var i = 0
        while i < end {
            guard runScalar(scalars[i]) else { out.append(scalars[i]); i += 1; continue }
            var j = i
            while j < end, runScalar(scalars[j]) { j += 1 }
            let run = scalars[i..<j]
            if run.count >= 16 && run.contains(where: { ("0"..."9").contains($0) }) {
                out.append(contentsOf: "***".unicodeScalars)
            } else {
                out.append(contentsOf: run)
            }
            i = j
        }
        if secretFollows { out.append(contentsOf: "***".unicodeScalars) } else if cut { out.append("…") }
        return String(out)
    }
}
