#if canImport(Glibc)
import Glibc
#endif
import CWebKitGTK
import SmarticoClient
import SmarticoWrapperCore

// smartico-wrapper: shows what smarticod receives from Smartico (popups, mini-games, the
// gamification widget) on this screen. One instance per graphical session (GApplication's
// single-instance activation over the session bus): a later `smartico-wrapper --open DP` hands
// its command line to the running instance and exits.

let appID = "ai.smartico.Wrapper"

func fail(_ text: String, code: Int32) -> Never {
    Logger(minimum: .error).error(text)
    exit(code)
}

let arguments: WrapperArguments
do {
    arguments = try WrapperArguments.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    fail("\(error)", code: 2)
}
if arguments.help {
    print(WrapperArguments.usage)
    exit(0)
}
if arguments.version {
    print("smartico-wrapper \(SmarticoClient.version)")
    exit(0)
}

var config = WrapperConfig()
// --config, else the first default file that exists (the user's, then the machine's).
let environment = ["XDG_CONFIG_HOME", "HOME"].reduce(into: [String: String]()) { env, name in
    if let value = getenv(name) { env[name] = String(cString: value) }
}
let configPath = arguments.config ?? WrapperConfig.defaultPaths(environment: environment).first { access($0, F_OK) == 0 }
if let path = configPath {
    let named = arguments.config != nil ? "--config \(path)" : path
    guard let file = fopen(path, "rb") else { fail("cannot read \(named): \(String(cString: strerror(errno)))", code: 78) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = fread(&chunk, 1, chunk.count, file)
        if n > 0 { bytes += chunk[0..<n] }
        if n < chunk.count { break }
        if bytes.count > 1 << 20 { fail("\(path) is larger than 1 MiB: not a wrapper configuration", code: 78) }
    }
    fclose(file)
    do {
        config = try WrapperConfig.parse(bytes, file: path)
    } catch {
        fail("invalid configuration:\n\(error)", code: 78)
    }
}
let kiosk = arguments.kiosk || config.kiosk
if kiosk, config.openExternalLinks == nil { config.openExternalLinks = false }
let socketPath = arguments.socket ?? config.socket ?? SmarticoClient.defaultSocketPath
let logger = Logger(minimum: arguments.logLevel)
let durableName = config.durableName(uid: getuid())

// GTK's Cairo renderer unless the user chose another: a popup is a few rectangles and text,
// and the GL renderer costs ~100 MB more under Xvfb and on boxes without working GL
// (docs/wrapper.md has the figures). With Cairo, GDK need not open GL at all: without
// gl-disable it still loads the GL driver (Mesa, LLVM) at start, 30 MB of this process.
setenv("GSK_RENDERER", "cairo", 0)
if String(cString: getenv("GSK_RENDERER")) == "cairo", getenv("GDK_DEBUG") == nil {
    setenv("GDK_DEBUG", "gl-disable", 1)
}
// WebKit's memory-pressure monitor thread in this process polls every 5 s from the first web view
// until exit, views or not: 12 wake-ups a minute with nothing on screen. The web processes watch
// their own memory instead (Host: the web context's memory-pressure settings).
setenv("WEBKIT_DISABLE_MEMORY_PRESSURE_MONITOR", "1", 0)

// The web process extension (WebProcessExtension): as packaged beside the binary, or as built.
let extensionDirectory: String? = {
    var path = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let n = readlink("/proc/self/exe", &path, path.count - 1)
    let executable = n > 0 ? String(decoding: path[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
    // WebKit loads every library in the directory into the web processes: only a file, and a
    // directory, that no other user can replace (owned by root or this user, not writable by group
    // or others). The build's path is baked into the binary and may not exist where it runs: under
    // /tmp another user could create it.
    func ownedByUs(_ path: String) -> Bool {
        var info = stat()
        guard lstat(path, &info) == 0 else { return false }
        return (info.st_uid == 0 || info.st_uid == geteuid()) && info.st_mode & 0o022 == 0
    }
    return WebProcessExtension.directory(executable: executable, built: builtWebExtensionDirectory) { file in
        let directory = String(file[..<(file.lastIndex(of: "/") ?? file.endIndex)])
        return access(file, R_OK) == 0 && ownedByUs(file) && ownedByUs(directory)
    }
}()

let app = gtk_application_new(appID, G_APPLICATION_HANDLES_COMMAND_LINE)

/// Every invocation's command line, in the running (primary) instance.
let onCommandLine: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Int32 = { _, commandLine, _ in
    var argc: Int32 = 0
    let argv = g_application_command_line_get_arguments(cast(commandLine), &argc)
    var args: [String] = []
    if let argv {
        for i in 1..<max(Int(argc), 1) { if let p = argv[i] { args.append(String(cString: p)) } }
        g_strfreev(argv)
    }
    let invocation: WrapperArguments
    do {
        invocation = try WrapperArguments.parse(args)
    } catch {
        logger.warning("ignored an invocation: \(error)")
        return 2
    }
    if host == nil {
        host = Host(app: app, config: config, kiosk: kiosk, log: logger, extensionDirectory: extensionDirectory)
        host.start()
        g_application_hold(cast(app))
        do {
            host.daemon = try LinkAdapter(path: socketPath, durable: durableName, maxHeld: config.maxQueuedPopups)
        } catch {
            logger.error("cannot start the link to smarticod: \(error)")
            g_application_release(cast(app))
            return 1
        }
        logger.info("started; smarticod at \(socketPath), durable subscription \(Text.quoted(durableName))\(kiosk ? ", kiosk mode" : ""); configuration \(configPath.map { Text.quoted($0) } ?? "none (every default)")")
        if let extensionDirectory {
            logger.debug("web process extension: \(extensionDirectory)/\(WebProcessExtension.fileName)")
        } else {
            logger.info("no \(WebProcessExtension.fileName) (in ../lib/smartico-wrapper or the build): web processes keep the pages of their libraries' code (docs/wrapper.md, memory)")
        }
    } else if !invocation.open {
        logger.info("already running; another invocation without --open changed nothing")
    }
    if invocation.open { host.open(deepLink: invocation.openDeepLink) }
    return 0
}
connect(raw(app), "command-line", onCommandLine)

/// SIGTERM, SIGINT: stop the link (nothing unacknowledged is lost: the daemon replays it next
/// time) and leave the main loop.
let onSignal: @convention(c) (UnsafeMutableRawPointer?) -> Int32 = { _ in
    logger.info("stopping")
    host?.shutdown()
    g_application_quit(cast(app))
    return 1
}
g_unix_signal_add(SIGTERM, onSignal, nil)
g_unix_signal_add(SIGINT, onSignal, nil)

let status = g_application_run(cast(app), CommandLine.argc, CommandLine.unsafeArgv)
host?.shutdown()
exit(status)
