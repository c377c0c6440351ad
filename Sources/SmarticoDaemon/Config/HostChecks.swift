#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension DaemonConfig {
    /// The label key of config.example.json: all zeros, with any environment suffix.
    static let placeholderLabelKey = "00000000-0000-0000-0000-000000000000"

    /// What `smarticod` can find wrong on this machine without the network, once ``validate()``
    /// found nothing: the placeholder label key (only a warning against a loopback `server.url`,
    /// as the simulator is), `ws://` to a host that is not loopback (a warning), an unreadable
    /// `server.tls.ca_file`; with `socketDirectory`, a socket directory neither present nor
    /// creatable (at start the daemon reports it itself, exit 73); with `stateDirectory`, a
    /// `state_dir` the store would refuse; with `metricsDirectory`, a `metrics.textfile` directory
    /// the daemon could not or would not write in, and a name node_exporter would not read (a warning).
    ///
    /// Blocking file-system calls: call it from the main thread before the daemon starts.
    public func hostProblems(socketDirectory: Bool, metricsDirectory: Bool = false, stateDirectory: Bool = false) -> [ConfigProblem] {
        var problems: [ConfigProblem] = []
        func add(_ key: String, _ message: String?, _ severity: ConfigProblem.Severity = .error) {
            if let message { problems.append(ConfigProblem(key: key, message: message, severity: severity)) }
        }
        let endpoint = server.url.flatMap { try? WebSocketEndpoint.parse($0).get() }
        let loopback = endpoint.map { Self.isLoopback(host: $0.host) } ?? false
        if server.labelKey.exposedValue.hasPrefix(Self.placeholderLabelKey) {
            let placeholder = "is the all-zero placeholder of config.example.json; "
            if loopback {
                add("server.label_key", placeholder + "accepted only because server.url points at a loopback host (a simulator); "
                    + "put the label's real key before using a real server", .warning)
            } else {
                add("server.label_key", placeholder + "put the label's real key (from Smartico's back office)")
            }
        }
        if let endpoint, !endpoint.secure, !loopback {
            add("server.url", "uses ws:// to \(endpoint.host), which is not a loopback host: the session (label key, user hash) "
                + "travels in the clear; use wss://", .warning)
        }
        if let caFile = server.tls.caFile {
            let fd = open(caFile, O_RDONLY | O_CLOEXEC)
            var reason = fd < 0 ? String(cString: strerror(errno)) : nil
            if fd >= 0 {
                var info = stat()
                if fstat(fd, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR { reason = "is a directory" }
                close(fd)
            }
            let fix = "point it at a readable PEM bundle or set it to null for the system store"
            add("server.tls.ca_file", reason.map { "cannot read \(caFile): \($0); \(fix)" })
        }
        if socketDirectory {
            add("socket.path", Self.directoryProblem(Self.directoryOf(socket.path), what: "the socket's directory",
                                                     fix: "choose another socket.path or fix the permissions"))
        }
        var info = stat()
        if stateDirectory, stat(stateDir, &info) == 0, info.st_mode & S_IFMT == S_IFDIR {
            add("state_dir", SmarticoStore.stateDirectoryRefusal(stateDir, info, uid: Self.checkedOwner))  // refused at start (exit 73)
        }
        if metricsDirectory, let textfile = metrics.textfile {
            let directory = Self.directoryOf(textfile)
            if let problem = Self.directoryProblem(directory, what: "the directory of metrics.textfile",
                                                   fix: "choose another metrics.textfile, fix the permissions, or set it to null") {
                add("metrics.textfile", problem)
            } else if stat(directory, &info) == 0 {
                // Refused at every write (docs/security.md, "Files the daemon writes").
                let refusal = MetricsTextfileWriter.directoryRefusal(directory, info, uid: Self.checkedOwner)
                add("metrics.textfile", refusal.map { "\(textfile) would not be written: \($0)" })
            }
            if !textfile.hasSuffix(".prom") {
                add("metrics.textfile", "\(textfile) does not end in .prom: node_exporter's textfile collector reads only *.prom files", .warning)
            }
        }
        return problems
    }

    /// The uid that must own `state_dir` and the textfile's directory: the user running the check,
    /// taken for the daemon's user (docs/operations.md). Nil for root, as in the package's postinst,
    /// where only the modes are checked (the daemon checks the owner at start).
    static var checkedOwner: uid_t? { geteuid() == 0 ? nil : geteuid() }

    /// `localhost`, `127.0.0.0/8` or `::1`.
    static func isLoopback(host: String) -> Bool {
        if host == "localhost" || host.hasSuffix(".localhost") || host == "::1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    /// The directory part of `path` (`/` for a file at the root, `.` for a bare name).
    static func directoryOf(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// Why `directory` (`what`, e.g. "the socket's directory") cannot be used or created, or nil
    /// when it can: its first existing ancestor (or itself) must be a directory the daemon can
    /// write and search. `fix` says what to do about a permission problem.
    static func directoryProblem(_ directory: String, what: String, fix: String) -> String? {
        var candidate = directory
        while true {
            var info = stat()
            if stat(candidate, &info) == 0 {
                if info.st_mode & S_IFMT != S_IFDIR { return "\(what) \(directory) cannot be created: \(candidate) is not a directory" }
                guard access(candidate, W_OK | X_OK) != 0 else { return nil }
                let reason = String(cString: strerror(errno))
                let problem = candidate == directory ? "is not writable" : "cannot be created in \(candidate)"
                return "\(what) \(directory) \(problem): \(reason); \(fix)"
            }
            let error = errno
            // ENOTDIR: an ancestor is not a directory; walking up finds it and says so.
            guard error == ENOENT || error == ENOTDIR, candidate != "/", candidate != "." else {
                return "\(what) \(directory) is unusable: \(candidate): \(String(cString: strerror(error)))"
            }
            candidate = directoryOf(candidate)
        }
    }
}
