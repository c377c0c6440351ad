#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension DaemonConfig {
    /// The label key of config.example.json: all zeros, with any environment suffix.
    static let placeholderLabelKey = "00000000-0000-0000-0000-000000000000"

    /// The problems `smarticod` can find on this machine without the network, after
    /// ``validate()`` found none: an unreadable `server.tls.ca_file`; a socket directory that is
    /// neither present nor creatable (when `socketDirectory` is true; the daemon itself reports
    /// it at start with exit 73); the placeholder label key (a warning when `server.url` points at
    /// a loopback host, as the simulator does in the demo and the tests; an error otherwise);
    /// a `ws://` URL to a host that is not loopback (a warning: traffic in the clear); when
    /// `metricsDirectory` is true, a `metrics.textfile` directory that is neither writable nor
    /// creatable (the daemon keeps running when it cannot write there, with a warning in its log),
    /// or one it would refuse to write in (owned by another user, or writable by every user without
    /// the sticky bit), and a `metrics.textfile` name node_exporter's textfile collector would not
    /// read (a warning); when `stateDirectory` is true, an existing `state_dir` the daemon would
    /// refuse at start (another user's, or writable by its group or others).
    ///
    /// Blocking file-system calls: call it from the main thread before the daemon starts.
    public func hostProblems(socketDirectory: Bool, metricsDirectory: Bool = false, stateDirectory: Bool = false) -> [ConfigProblem] {
        var problems: [ConfigProblem] = []
        let endpoint: WebSocketEndpoint? = server.url.flatMap { try? WebSocketEndpoint.parse($0).get() }
        let loopback = endpoint.map { Self.isLoopback(host: $0.host) } ?? false

        if server.labelKey.exposedValue.hasPrefix(Self.placeholderLabelKey) {
            if loopback {
                problems.append(ConfigProblem(
                    key: "server.label_key",
                    message: "is the all-zero placeholder of config.example.json; accepted only because server.url points at a loopback host (a simulator); put the label's real key before using a real server",
                    severity: .warning))
            } else {
                problems.append(ConfigProblem(
                    key: "server.label_key",
                    message: "is the all-zero placeholder of config.example.json; put the label's real key (from Smartico's back office)"))
            }
        }
        if let endpoint, !endpoint.secure, !loopback {
            problems.append(ConfigProblem(
                key: "server.url",
                message: "uses ws:// to \(endpoint.host), which is not a loopback host: the session (label key, user hash) travels in the clear; use wss://",
                severity: .warning))
        }
        if let caFile = server.tls.caFile {
            let fd = open(caFile, O_RDONLY | O_CLOEXEC)
            if fd < 0 {
                let reason = String(cString: strerror(errno))
                problems.append(ConfigProblem(
                    key: "server.tls.ca_file",
                    message: "cannot read \(caFile): \(reason); point it at a readable PEM bundle or set it to null for the system store"))
            } else {
                var info = stat()
                if fstat(fd, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR {
                    problems.append(ConfigProblem(
                        key: "server.tls.ca_file",
                        message: "cannot read \(caFile): is a directory; point it at a readable PEM bundle or set it to null for the system store"))
                }
                close(fd)
            }
        }
        if socketDirectory, let problem = Self.socketDirectoryProblem(socket.path) {
            problems.append(ConfigProblem(key: "socket.path", message: problem))
        }
        if stateDirectory {
            // An existing state_dir the store would refuse at start (exit 73).
            var info = stat()
            if stat(stateDir, &info) == 0, info.st_mode & S_IFMT == S_IFDIR,
               let refusal = SmarticoStore.stateDirectoryRefusal(stateDir, info, uid: Self.checkedOwner) {
                problems.append(ConfigProblem(key: "state_dir", message: refusal))
            }
        }
        if metricsDirectory, let textfile = metrics.textfile {
            if let problem = Self.directoryProblem(
                Self.directoryOf(textfile), what: "the directory of metrics.textfile",
                fix: "choose another metrics.textfile, fix the permissions, or set it to null")
            {
                problems.append(ConfigProblem(key: "metrics.textfile", message: problem))
            } else {
                // An existing directory the daemon would refuse at every write (docs/security.md,
                // "Files the daemon writes").
                let directory = Self.directoryOf(textfile)
                var info = stat()
                if stat(directory, &info) == 0,
                   let refusal = MetricsTextfileWriter.directoryRefusal(directory, info, uid: Self.checkedOwner) {
                    problems.append(ConfigProblem(key: "metrics.textfile", message: "\(textfile) would not be written: \(refusal)"))
                }
            }
            if !textfile.hasSuffix(".prom") {
                problems.append(ConfigProblem(
                    key: "metrics.textfile",
                    message: "\(textfile) does not end in .prom: node_exporter's textfile collector reads only *.prom files",
                    severity: .warning))
            }
        }
        return problems
    }

    /// The uid whose ownership of `state_dir` and the textfile's directory the checks require: the
    /// user running them, taken for the daemon's user (docs/operations.md runs `--check-config` as
    /// that user). Nil for root: the package's postinst runs the check as root, and the unit's
    /// `User=` is not known, so only the modes are checked then (the daemon checks the owner at
    /// start).
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
        let dir = String(path[..<slash])
        return dir.isEmpty ? "/" : dir
    }

    /// Why the directory of the socket at `path` cannot be used or created, or nil when it can:
    /// the first existing ancestor (or the directory itself) must be a directory the daemon can
    /// write and search.
    static func socketDirectoryProblem(_ path: String) -> String? {
        directoryProblem(directoryOf(path), what: "the socket's directory", fix: "choose another socket.path or fix the permissions")
    }

    /// Why `directory` (`what`, e.g. "the socket's directory") cannot be used or created, or nil
    /// when it can: the first existing ancestor (or the directory itself) must be a directory the
    /// daemon can write and search. `fix` says what to do about a permission problem.
    static func directoryProblem(_ directory: String, what whatDirectory: String, fix: String) -> String? {
        var candidate = directory
        while true {
            var info = stat()
            if stat(candidate, &info) == 0 {
                if info.st_mode & S_IFMT != S_IFDIR {
                    return "\(whatDirectory) \(directory) cannot be created: \(candidate) is not a directory"
                }
                if access(candidate, W_OK | X_OK) != 0 {
                    let reason = String(cString: strerror(errno))
                    let what = candidate == directory ? "\(whatDirectory) \(directory) is not writable" : "\(whatDirectory) \(directory) cannot be created in \(candidate)"
                    return "\(what): \(reason); \(fix)"
                }
                return nil
            }
            let error = errno
            // ENOTDIR: an ancestor is not a directory; walking up finds it and says so.
            guard error == ENOENT || error == ENOTDIR, candidate != "/", candidate != "." else {
                return "\(whatDirectory) \(directory) is unusable: \(candidate): \(String(cString: strerror(error)))"
            }
            candidate = directoryOf(candidate)
        }
    }
}
