#if canImport(Glibc)
import Glibc
#endif
import CDisplayWatch
import CWebKitGTK
import CWorkingSet
import SmarticoProtocol
import SmarticoWrapperCore

/// The daemon as the host sees it: requests out, answered later on the main thread.
protocol DaemonPort: AnyObject {
    func request(_ op: String, _ arguments: JSONObject, completion: @escaping @Sendable (Result<JSONValue, any Error>) -> Void)
    /// How many engagements the model holds now (the link waits while it is at the limit).
    func popupsHeld(_ count: Int)
    func stop()
}

/// The one object of the main thread: the model, the two surfaces, the daemon link, the timers.
/// Everything here runs in GLib's main loop; the link's thread reaches it only through `onMain`.
final class Host {
    let app: UnsafeMutablePointer<GtkApplication>?
    let config: WrapperConfig
    let kiosk: Bool
    let log: Logger
    var model: WrapperModel
    var daemon: (any DaemonPort)?
    let popup = WebSurface(kind: .popup)
    let widget = WebSurface(kind: .widget)
    /// WebKit's process pool (the web and network processes) and the network session of the two
    /// views: made with the first view, dropped with the last, so that nothing of WebKit runs
    /// while nothing is on screen (the default context keeps its processes for reuse).
    private var webContext: OpaquePointer?
    private var networkSession: OpaquePointer?
    private var deadlineTimer: MainTimer?
    private var releaseTimer: MainTimer?
    /// A few seconds after a release, once WebKit's teardown has run: memory back to the system.
    private var compactTimer: MainTimer?
    /// A few seconds after something is shown: the pages of the libraries' code that only ran while
    /// WebKit started (Mesa's driver and LLVM above all) are unmapped, here and in the web processes.
    private var unmapTimer: MainTimer?
    /// Whether this process unmapped them since its web context was made (once per context; the
    /// web processes keep count of their own).
    private var libraryPagesUnmapped = false
    /// The directory of the web process extension (`WebProcessExtension`), nil when it was not found.
    private let extensionDirectory: String?
    /// `--open` asked before a widget URL was known: served once one is.
    private var pendingOpen: String??

    init(app: UnsafeMutablePointer<GtkApplication>?, config: WrapperConfig, kiosk: Bool, log: Logger, extensionDirectory: String?) {
        self.app = app
        self.config = config
        self.kiosk = kiosk
        self.log = log
        self.model = WrapperModel(config: config)
        self.extensionDirectory = extensionDirectory
    }

    func start() {
        deadlineTimer = MainTimer { [unowned self] in self.perform(self.model.tick(now: monotonicMs())) }
        releaseTimer = MainTimer { [unowned self] in self.releaseIdleViews() }
        compactTimer = MainTimer { [unowned self] in self.compact() }
        unmapTimer = MainTimer { [unowned self] in self.unmapLibraryPages() }
        _ = smw_watch_display(raw(gdk_display_get_default()), onDisplayLost)
        let css = gtk_css_provider_new()
        gtk_css_provider_load_from_data(css, "window.smartico-popup { background: transparent; }", -1)
        gtk_style_context_add_provider_for_display(gdk_display_get_default(), opaque(css), UInt32(GTK_STYLE_PROVIDER_PRIORITY_APPLICATION))
        g_object_unref(raw(css))
    }

    // MARK: - The daemon

    func daemonConnected(version: String) {
        log.info("connected to smarticod \(version)")
        perform(model.linkConnected())
        daemon?.request("status", JSONObject()) { result in
            guard case .success(let status) = result else { return }
            onMain { host.statusReceived(status) }
        }
    }

    func statusReceived(_ status: JSONValue) {
        perform(model.statusReceived(status))
        servePendingOpen()
    }

    func daemonDisconnected(reason: String) {
        log.warning("lost smarticod (\(reason)); reconnecting; what is on screen stays, and nothing acknowledged is lost")
    }

    func daemonEvent(name: String, seq: Int64?, data: JSONValue) {
        perform(model.receive(event: name, seq: seq, data: data, now: monotonicMs()))
        if name == "identified" || name == "props" { servePendingOpen() }
    }

    /// `--open [DP]`, from this process's command line or another invocation's.
    func open(deepLink: String?) {
        guard model.canOpenWidget else {
            log.info("--open: waiting for the gamification URL from smarticod (no user identified yet?)")
            pendingOpen = .some(deepLink)
            return
        }
        perform(model.open(deepLink: deepLink))
    }

    private func servePendingOpen() {
        guard let pending = pendingOpen, model.canOpenWidget else { return }
        pendingOpen = nil
        perform(model.open(deepLink: pending))
    }

    // MARK: - Commands

    func perform(_ commands: [WrapperCommand]) {
        for command in commands {
            switch command {
            case .log(let level, let text): log.write(level, text)
            case .popup(let c): apply(c, to: popup)
            case .widget(let c): apply(c, to: widget)
            case .daemon(let op, let arguments): request(op, arguments)
            case .run(let argv): spawn(argv)
            case .openExternal(let url): openExternal(url)
            }
        }
        daemon?.popupsHeld(model.popupsHeld)
        if let deadline = model.deadline {
            deadlineTimer?.schedule(afterMs: deadline - monotonicMs())
        } else {
            deadlineTimer?.cancel()
        }
        if model.isBusy {
            releaseTimer?.cancel()
        } else if (popup.exists || widget.exists), releaseTimer?.isScheduled == false {
            releaseTimer?.schedule(afterMs: Int64(config.releaseAfterSeconds) * 1000)
        }
    }

    private func apply(_ command: ViewCommand, to surface: WebSurface) {
        switch command {
        case .load(let url): log.debug("\(surface.kind.name): loading \(Text.quoted(url))")
        case .inject: log.debug("\(surface.kind.name): SHOW_ENGAGEMENT injected")
        case .show: log.debug("\(surface.kind.name): on screen")
        case .close: log.debug("\(surface.kind.name): closed")
        }
        switch command {
        case .load(let url):
            if !surface.exists {
                compactTimer?.cancel()
                if webContext == nil {
                    // Memory-pressure settings of its own make each web process watch its own
                    // memory, since main() turns off the monitor WebKit would run in this process
                    // (a thread polling every 5 s for as long as the process lives).
                    let pressure = webkit_memory_pressure_settings_new()
                    webContext = smw_web_context_new(pressure)
                    webkit_memory_pressure_settings_free(pressure)
                    // No page cache: a page left is not kept alive in its process.
                    webkit_web_context_set_cache_model(webContext, WEBKIT_CACHE_MODEL_DOCUMENT_VIEWER)
                    // The extension that unmaps a web process's library pages when asked (WebKit
                    // makes its directory readable in the sandbox).
                    if let extensionDirectory {
                        webkit_web_context_set_web_process_extensions_directory(webContext, extensionDirectory)
                    }
                    // One ephemeral session for both views: one network process, nothing on disk.
                    networkSession = webkit_network_session_new_ephemeral()
                }
                surface.create(app: app, context: webContext, session: networkSession, config: config, kiosk: kiosk)
            }
            surface.load(url)
        case .inject(let script): surface.run(script)
        case .show:
            // A popup stays above the widget and keeps the keyboard: the widget a popup's link
            // opened can finish loading after the next popup is on screen, and must not cover it.
            let underPopup = surface === widget && popup.visible
            surface.show(focus: !underPopup)
            if underPopup { popup.show() }
            if unmapTimer?.isScheduled == false { unmapTimer?.schedule(afterMs: unmapDelayMs) }
        case .close: surface.hide()
        }
    }

    /// Bridge messages sent to the daemon and not yet answered (how many, their bytes), and how
    /// many were dropped or failed since none was waiting: a page that posts faster than the
    /// daemon takes them (or while the daemon is away) costs at most `relayBudget` bytes and
    /// `relayMaxPending` requests, which leaves room in the link (1,000 requests) for the acks,
    /// and one warning at the start and one at the end of the flood, not one per message.
    private var relayBytes = 0
    private var relayCount = 0
    private var relaysDropped = 0
    private var relaysFailed = 0
    static let relayBudget = 4 << 20
    static let relayMaxPending = 256

    private func request(_ op: String, _ arguments: JSONObject) {
        guard let daemon else { return }
        let log = self.log
        guard op == "bridge" else {
            daemon.request(op, arguments) { result in
                if case .failure(let error) = result { log.warning("\(op) to smarticod failed: \(error)") }
            }
            return
        }
        let size = JSONValue.object(arguments).serialized().count
        guard relayBytes + size <= Host.relayBudget, relayCount < Host.relayMaxPending else {
            relaysDropped += 1
            if relaysDropped == 1 {
                log.warning("a page posts bridge messages faster than smarticod takes them (\(relayCount) waiting, \(relayBytes >> 10) KiB): dropping them until it catches up")
            }
            return
        }
        relayBytes += size
        relayCount += 1
        daemon.request(op, arguments) { result in
            let failure: String? = if case .failure(let error) = result { "\(error)" } else { nil }
            onMain { host.relayAnswered(size, failure: failure) }
        }
    }

    private func relayAnswered(_ size: Int, failure: String?) {
        relayBytes -= size
        relayCount -= 1
        if let failure {
            relaysFailed += 1
            if relaysFailed == 1 { log.warning("bridge to smarticod failed: \(failure)") }
        }
        guard relayCount == 0 else { return }
        if relaysDropped > 0 {
            log.warning("\(relaysDropped) bridge messages were dropped while smarticod was behind")
        }
        if relaysFailed > 1 {
            log.warning("\(relaysFailed) bridge messages failed in all while smarticod was behind")
        }
        relaysDropped = 0
        relaysFailed = 0
    }

    private func spawn(_ argv: [String]) {
        var cArgs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) }
        cArgs.append(nil)
        defer { for p in cArgs { free(p) } }
        var error: UnsafeMutablePointer<GError>?
        let flags = GSpawnFlags(rawValue: G_SPAWN_STDIN_FROM_DEV_NULL.rawValue)
        if g_spawn_async(nil, &cArgs, nil, flags, nil, nil, nil, &error) == 0 {
            log.error("cannot run \(Text.quoted(argv[0])): \(error.map { String(cString: $0.pointee.message) } ?? "unknown error")")
            g_error_free(error)
        }
    }

    private func openExternal(_ url: String) {
        var error: UnsafeMutablePointer<GError>?
        if g_app_info_launch_default_for_uri(url, nil, &error) == 0 {
            log.warning("cannot open \(Text.quoted(url)) in the default browser: \(error.map { String(cString: $0.pointee.message) } ?? "unknown error")")
            g_error_free(error)
        }
    }

    /// Nothing on screen for `release_after_s`: the views go, and their web processes with them.
    private func releaseIdleViews() {
        guard !model.isBusy else { return }
        guard popup.exists || widget.exists else { return }
        log.debug("nothing on screen for \(config.releaseAfterSeconds) s: releasing the web views")
        popup.destroy()
        widget.destroy()
        if let networkSession {
            g_object_unref(raw(networkSession))
            self.networkSession = nil
        }
        if let webContext {
            g_object_unref(raw(webContext))
            self.webContext = nil
        }
        unmapTimer?.cancel()
        libraryPagesUnmapped = false
        // WebKit's teardown (the web and network processes ending, their connections closing)
        // runs in the next turns of the main loop and touches its code again: compact after it.
        compactTimer?.schedule(afterMs: compactDelayMs)
    }

    /// What the views and WebKit's UI side freed goes back to the system, not to malloc's free
    /// lists, and the file pages they touched (WebKit's, JavaScriptCore's, Mesa's and LLVM's code
    /// and data) go back to the kernel until the next popup reads what it needs
    /// (docs/wrapper.md, "Rendering, memory and wake-ups"). `MADV_PAGEOUT` drops only the pages of
    /// files this process may write: the libraries are root's, so for any other user it is the
    /// unmapping that hands their pages back.
    private func compact() {
        guard !popup.exists, !widget.exists else { return }
        malloc_trim(0)
        let pagedOut = pageOutFileMappings()
        log.debug("released memory: \(pagedOut) read-only file mappings paged out, \(kibText(smw_unmap_library_pages())) of library pages unmapped")
    }

    /// Once something has been on screen for a few seconds: the pages of the libraries' code and
    /// constants stop counting against this process and the web processes. Most are those of what
    /// only ran while WebKit started: Mesa's driver and LLVM, which WebKit's EGL display loads and
    /// Skia's CPU renderer never draws with. What is still used is mapped again from the page
    /// cache when next touched (docs/wrapper.md, "Rendering, memory and wake-ups").
    private func unmapLibraryPages() {
        if extensionDirectory != nil {
            for surface in [popup, widget] where surface.exists { surface.unmapLibraryPages() }
        }
        guard webContext != nil, !libraryPagesUnmapped else { return }
        libraryPagesUnmapped = true
        log.debug("library pages unmapped: \(kibText(smw_unmap_library_pages())) in this process")
    }

    /// A web process's answer to `unmapLibraryPages` (0: it had done it already).
    func webProcessUnmapped(_ kind: SurfaceKind, kib: Int?, failure: String?) {
        if let failure {
            log.debug("\(kind.name): its web process did not unmap its library pages: \(failure)")
        } else if let kib, kib != 0 {
            log.debug("\(kind.name): library pages unmapped: \(kibText(kib)) in its web process")
        }
    }

    // MARK: - The pages (signal handlers call these)

    func pageMessage(_ text: String, from kind: SurfaceKind) {
        switch kind {
        case .popup: perform(model.popupMessage(text, frameURL: popup.currentURL, now: monotonicMs()))
        case .widget: perform(model.widgetMessage(text, frameURL: widget.currentURL))
        }
    }

    /// Whether a navigation may happen in a view. Top-level loads the wrapper starts itself are
    /// already checked; `about:blank` is how it unloads a page.
    func decideNavigation(url: String, userGesture: Bool, newWindow: Bool, surface kind: SurfaceKind) -> Bool {
        if url == "about:blank" || url == "about:srcdoc" { return !newWindow }
        if !newWindow, model.allowsNavigation(to: url) { return true }
        let isWeb = (try? WebOrigin(url: url)) != nil
        if isWeb, userGesture, config.externalLinksAllowed {
            log.info("\(kind.name): opening \(Text.quoted(url)) in the default browser (not an allowed origin)")
            openExternal(url)
        } else {
            log.warning("\(kind.name): refused a navigation to \(Text.quoted(url)) (\(isWeb ? "not an allowed origin" : "not an http(s) URL"))")
        }
        return false
    }

    func loadCommitted(_ kind: SurfaceKind, url: String) {
        guard kind == .popup, url != "about:blank" else { return }
        model.popupCommitted(now: monotonicMs())
        perform([])
    }

    func loadFinished(_ kind: SurfaceKind, url: String, httpStatus: Int) {
        guard url != "about:blank" else { return }
        switch kind {
        case .popup:
            if httpStatus >= 400 { perform(model.popupLoadFailed("HTTP \(httpStatus) from \(url)", now: monotonicMs())) }
        case .widget:
            if httpStatus >= 400 {
                perform(model.widgetClosed("HTTP \(httpStatus) from \(url)"))
            } else {
                perform(model.widgetLoaded())
            }
        }
    }

    func loadFailed(_ kind: SurfaceKind, url: String, reason: String) {
        guard url != "about:blank" else { return }
        switch kind {
        case .popup: perform(model.popupLoadFailed("\(reason) (\(url))", now: monotonicMs()))
        case .widget: perform(model.widgetClosed("\(reason) (\(url))"))
        }
    }

    func webProcessEnded(_ kind: SurfaceKind, reason: String) {
        switch kind {
        case .popup: perform(model.popupDismissed(reason, now: monotonicMs()))
        case .widget: perform(model.widgetClosed(reason))
        }
        // A crashed view is not reused.
        (kind == .popup ? popup : widget).destroy()
    }

    func pageClosedItself(_ kind: SurfaceKind) {
        switch kind {
        case .popup: perform(model.popupDismissed("the page called window.close()", now: monotonicMs()))
        case .widget: perform(model.widgetClosed(nil))
        }
    }

    func windowCloseRequested(_ kind: SurfaceKind) {
        switch kind {
        case .popup: perform(model.popupDismissed("its window was closed", now: monotonicMs()))
        case .widget: perform(model.widgetClosed(nil))
        }
    }

    func shutdown() {
        daemon?.stop()
        daemon = nil
        deadlineTimer?.cancel()
        releaseTimer?.cancel()
        compactTimer?.cancel()
    }
}

/// From a view's showing to the unmapping of the library pages: its first frames drawn.
private let unmapDelayMs: Int64 = 3000

/// KiB as a log shows them; -1 (the kernel refused) as such.
private func kibText(_ kib: Int) -> String {
    kib < 0 ? "nothing (refused)" : "\(kib) KiB"
}

/// From the release of the views to their memory's: WebKit's teardown takes a few turns of the
/// main loop (the web process ends, the network process after it).
private let compactDelayMs: Int64 = 5000

/// The X server or the Wayland compositor went away (GTK then ends the process with 1): one clear
/// line first. Called from Xlib's I/O error handler or a watch on the compositor's socket, so it
/// only writes; the daemon keeps what was not acknowledged.
private let onDisplayLost: @convention(c) (Int32) -> Void = { kind in
    let what = kind == 2 ? "the Wayland compositor went away" : "the X server went away"
    host.log.error("lost the display (\(what)): exiting with 1; popups not yet handled are shown again after the next start")
}

/// The one `Host`. Set once in main() before the main loop runs; used only on the main thread
/// (GLib calls every signal handler, timer and idle callback there), so it needs no lock.
nonisolated(unsafe) var host: Host!
