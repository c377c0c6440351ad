import CWebKitGTK
import CWorkingSet
import SmarticoWrapperCore

/// Which of the two independent web views a callback is about (the signal's user data).
enum SurfaceKind: Int {
    case popup = 1
    case widget = 2

    var name: String { self == .popup ? "popup" : "widget" }
}

/// The name of the script message handler, registered in an isolated script world so that only
/// the wrapper's own script, injected in the top frame, can reach it: no frame of the page (and
/// no iframe of another origin) can post to the native side directly.
let bridgeHandler = "smarticoBridge"
let bridgeWorld = "smartico-wrapper"

/// In the page's world, top frame only, at document start: `SmarticoBridge.postMessage` and
/// `ReactNativeWebView.postMessage`, as Smartico's pages expect from a native host. They hand
/// the message (as a string) to the isolated world through a DOM event on the top document.
let pageWorldScript = """
    (function(){
      function post(m){
        var s = (typeof m === 'string') ? m : JSON.stringify(m);
        document.dispatchEvent(new CustomEvent('smartico-wrapper-post', {detail: String(s)}));
      }
      var bridge = Object.freeze({postMessage: post});
      try { Object.defineProperty(window, 'SmarticoBridge', {value: bridge, writable: false, configurable: false}); } catch (e) {}
      try { Object.defineProperty(window, 'ReactNativeWebView', {value: bridge, writable: false, configurable: false}); } catch (e) {}
    })();
    """

/// In the isolated world, top frame only: forwards what the page world posted to the native side.
let isolatedWorldScript = """
    document.addEventListener('smartico-wrapper-post', function(e){
      if (typeof e.detail === 'string') { window.webkit.messageHandlers.\(bridgeHandler).postMessage(e.detail); }
    }, true);
    """

/// One window holding one web view: the transparent, undecorated popup overlay, or the widget's
/// window. Created when first needed, destroyed after `release_after_s` with nothing on screen
/// (its web process ends with it).
final class WebSurface {
    let kind: SurfaceKind
    private(set) var window: UnsafeMutablePointer<GtkWidget>?
    private(set) var view: UnsafeMutablePointer<GtkWidget>?
    private(set) var contentManager: OpaquePointer?
    private(set) var visible = false

    init(kind: SurfaceKind) { self.kind = kind }

    var exists: Bool { window != nil }

    var webView: UnsafeMutablePointer<WebKitWebView>? { cast(view) }

    /// The URL of the view's top frame now.
    var currentURL: String? {
        guard let v = webView, let p = webkit_web_view_get_uri(v) else { return nil }
        return String(cString: p)
    }

    func create(app: UnsafeMutablePointer<GtkApplication>?, context: OpaquePointer?, session: OpaquePointer?, config: WrapperConfig, kiosk: Bool) {
        guard window == nil else { return }
        let settings = webkit_settings_new()
        webkit_settings_set_user_agent(settings, "SMTO-WRAPPER")
        webkit_settings_set_enable_developer_extras(settings, config.developerExtras ? 1 : 0)
        webkit_settings_set_javascript_can_open_windows_automatically(settings, 0)
        // No GPU path: smaller (one process less to map GL drivers into), and the same pixels
        // under Xvfb, a VM or a set-top box without working GL (docs/wrapper.md, memory).
        webkit_settings_set_hardware_acceleration_policy(settings, WEBKIT_HARDWARE_ACCELERATION_POLICY_NEVER)
        webkit_settings_set_enable_back_forward_navigation_gestures(settings, 0)

        let manager = webkit_user_content_manager_new()
        let pageScript = webkit_user_script_new(pageWorldScript, WEBKIT_USER_CONTENT_INJECT_TOP_FRAME,
                                                WEBKIT_USER_SCRIPT_INJECT_AT_DOCUMENT_START, nil, nil)
        let world = webkit_user_script_new_for_world(isolatedWorldScript, WEBKIT_USER_CONTENT_INJECT_TOP_FRAME,
                                                     WEBKIT_USER_SCRIPT_INJECT_AT_DOCUMENT_START, bridgeWorld, nil, nil)
        webkit_user_content_manager_add_script(manager, pageScript)
        webkit_user_content_manager_add_script(manager, world)
        webkit_user_script_unref(pageScript)
        webkit_user_script_unref(world)
        webkit_user_content_manager_register_script_message_handler(manager, bridgeHandler, bridgeWorld)
        connect(raw(manager), "script-message-received::\(bridgeHandler)", onScriptMessage, tag: kind.rawValue)

        let view = smw_web_view_new(context, session, manager, settings)
        g_object_unref(raw(settings))
        g_object_unref(raw(manager))
        contentManager = manager
        let webView: UnsafeMutablePointer<WebKitWebView>? = cast(view)
        if kind == .popup {
            var clear = GdkRGBA(red: 0, green: 0, blue: 0, alpha: 0)
            webkit_web_view_set_background_color(webView, &clear)
        }
        connect(raw(view), "decide-policy", onDecidePolicy, tag: kind.rawValue)
        connect(raw(view), "load-changed", onLoadChanged, tag: kind.rawValue)
        connect(raw(view), "load-failed", onLoadFailed, tag: kind.rawValue)
        connect(raw(view), "web-process-terminated", onWebProcessTerminated, tag: kind.rawValue)
        connect(raw(view), "close", onViewClose, tag: kind.rawValue)

        let window = gtk_window_new()
        let w: UnsafeMutablePointer<GtkWindow>? = cast(window)
        gtk_window_set_application(w, app)
        gtk_window_set_hide_on_close(w, 1)
        connect(raw(window), "close-request", onCloseRequest, tag: kind.rawValue)
        gtk_window_set_child(w, view)
        if kind == .popup {
            // An overlay over the whole screen, like the SDKs' full-screen transparent WebView:
            // the page draws its own backdrop and centres the popup.
            gtk_window_set_title(w, "Smartico popup")
            gtk_window_set_decorated(w, 0)
            gtk_widget_add_css_class(window, "smartico-popup")
            let (width, height) = monitorSize()
            gtk_window_set_default_size(w, width, height)
            if kiosk { gtk_window_fullscreen(w) }
        } else {
            gtk_window_set_title(w, "Smartico")
            if kiosk {
                // The screen's size as well as the full-screen request: a kiosk often runs
                // without a window manager, and only a window manager acts on that request.
                let (width, height) = monitorSize()
                gtk_window_set_default_size(w, width, height)
                gtk_window_set_decorated(w, 0)
                gtk_window_fullscreen(w)
            } else {
                gtk_window_set_default_size(w, Int32(config.widgetWidth), Int32(config.widgetHeight))
            }
        }
        self.window = window
        self.view = view
    }

    func load(_ url: String) {
        webkit_web_view_load_uri(webView, url)
    }

    func run(_ script: String) {
        webkit_web_view_evaluate_javascript(webView, script, -1, nil, nil, nil, nil, nil)
    }

    /// Asks the view's web process, through the wrapper's web process extension, to unmap the
    /// pages of its libraries' code and constants (`SMW_UNMAP_MESSAGE`); the answer goes to
    /// `Host.webProcessUnmapped`.
    func unmapLibraryPages() {
        guard let webView else { return }
        webkit_web_view_send_message_to_page(webView, webkit_user_message_new(SMW_UNMAP_MESSAGE, nil), nil,
                                             onUnmapAnswer, UnsafeMutableRawPointer(bitPattern: kind.rawValue))
    }

    /// Maps the window; `focus`: raised and given the keyboard too (false: it must not take the
    /// player's keys from a popup on screen).
    func show(focus: Bool = true) {
        guard let window else { return }
        visible = true
        if focus {
            gtk_window_present(cast(window))
        } else {
            gtk_widget_set_visible(window, 1)
        }
    }

    /// Hides the window and unloads the page (its timers and sockets stop).
    func hide() {
        guard let window else { return }
        visible = false
        gtk_widget_set_visible(window, 0)
        webkit_web_view_load_uri(webView, "about:blank")
    }

    /// Destroys the window and its view; the web process ends.
    func destroy() {
        guard let window else { return }
        visible = false
        if let contentManager {
            webkit_user_content_manager_unregister_script_message_handler(contentManager, bridgeHandler, bridgeWorld)
        }
        gtk_window_destroy(cast(window))
        self.window = nil
        self.view = nil
        self.contentManager = nil
    }

    private func monitorSize() -> (Int32, Int32) {
        guard let display = gdk_display_get_default(), let monitors = gdk_display_get_monitors(display),
              g_list_model_get_n_items(monitors) > 0, let monitor = g_list_model_get_item(monitors, 0)
        else { return (1024, 768) }
        defer { g_object_unref(monitor) }
        var rect = GdkRectangle()
        gdk_monitor_get_geometry(opaque(monitor), &rect)
        return (max(rect.width, 320), max(rect.height, 240))
    }
}

// MARK: - Signal handlers (C functions; `data` is the SurfaceKind)

private func surface(_ data: UnsafeMutableRawPointer?) -> SurfaceKind {
    SurfaceKind(rawValue: Int(bitPattern: data)) ?? .popup
}

private let onScriptMessage: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void = { _, value, data in
    let js: OpaquePointer? = value.map(OpaquePointer.init)
    guard let js else { return }
    let text: String?
    if jsc_value_is_string(js) != 0 {
        text = takeString(jsc_value_to_string(js))
    } else {
        text = takeString(jsc_value_to_json(js, 0))
    }
    host.pageMessage(text ?? "", from: surface(data))
}

private let onDecidePolicy: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?, UInt32, UnsafeMutableRawPointer?) -> Int32 = { _, decision, type, data in
    guard type == WEBKIT_POLICY_DECISION_TYPE_NAVIGATION_ACTION.rawValue || type == WEBKIT_POLICY_DECISION_TYPE_NEW_WINDOW_ACTION.rawValue else {
        return 0  // responses: WebKit's default
    }
    let action = webkit_navigation_policy_decision_get_navigation_action(opaque(decision))
    let request = webkit_navigation_action_get_request(action)
    let url = webkit_uri_request_get_uri(request).map { String(cString: $0) } ?? ""
    let userClick = webkit_navigation_action_is_user_gesture(action) != 0
    let newWindow = type == WEBKIT_POLICY_DECISION_TYPE_NEW_WINDOW_ACTION.rawValue
    if host.decideNavigation(url: url, userGesture: userClick, newWindow: newWindow, surface: surface(data)) {
        webkit_policy_decision_use(cast(decision))
    } else {
        webkit_policy_decision_ignore(cast(decision))
    }
    return 1
}

private let onLoadChanged: @convention(c) (UnsafeMutableRawPointer?, UInt32, UnsafeMutableRawPointer?) -> Void = { view, event, data in
    let webView: UnsafeMutablePointer<WebKitWebView>? = cast(view)
    let uri = webkit_web_view_get_uri(webView).map { String(cString: $0) } ?? ""
    if event == WEBKIT_LOAD_COMMITTED.rawValue {
        host.loadCommitted(surface(data), url: uri)
        return
    }
    guard event == WEBKIT_LOAD_FINISHED.rawValue else { return }
    var status: UInt32 = 0
    if let resource = webkit_web_view_get_main_resource(webView), let response = webkit_web_resource_get_response(resource) {
        status = webkit_uri_response_get_status_code(response)
    }
    host.loadFinished(surface(data), url: uri, httpStatus: Int(status))
}

private let onLoadFailed: @convention(c) (UnsafeMutableRawPointer?, UInt32, UnsafePointer<CChar>?, UnsafeMutablePointer<GError>?, UnsafeMutableRawPointer?) -> Int32 = { _, _, uri, error, data in
    // Our own cancellations (a new load, about:blank on close, a refused navigation) are no failures.
    if smw_error_is(error, webkit_network_error_quark(), Int32(WEBKIT_NETWORK_ERROR_CANCELLED.rawValue)) != 0
        || smw_error_is(error, webkit_policy_error_quark(), Int32(WEBKIT_POLICY_ERROR_FRAME_LOAD_INTERRUPTED_BY_POLICY_CHANGE.rawValue)) != 0 {
        return 0
    }
    let message = error.map { String(cString: $0.pointee.message) } ?? "unknown error"
    host.loadFailed(surface(data), url: uri.map { String(cString: $0) } ?? "", reason: message)
    return 0
}

private let onWebProcessTerminated: @convention(c) (UnsafeMutableRawPointer?, UInt32, UnsafeMutableRawPointer?) -> Void = { _, reason, data in
    let why = reason == WEBKIT_WEB_PROCESS_EXCEEDED_MEMORY_LIMIT.rawValue ? "its web process exceeded its memory limit" : "its web process ended"
    host.webProcessEnded(surface(data), reason: why)
}

private let onViewClose: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void = { _, data in
    host.pageClosedItself(surface(data))
}

private let onUnmapAnswer: @convention(c) (UnsafeMutablePointer<GObject>?, OpaquePointer?, UnsafeMutableRawPointer?) -> Void = { view, result, data in
    var error: UnsafeMutablePointer<GError>?
    guard let answer = webkit_web_view_send_message_to_page_finish(cast(view), result, &error) else {
        host.webProcessUnmapped(surface(data), kib: nil, failure: error.map { String(cString: $0.pointee.message) } ?? "no answer")
        g_error_free(error)
        return
    }
    var kib: gint64 = 0
    let valid = smw_user_message_int64(answer, &kib) != 0
    g_object_unref(raw(answer))
    host.webProcessUnmapped(surface(data), kib: valid ? Int(kib) : nil, failure: valid ? nil : "an answer without a size")
}

private let onCloseRequest: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Int32 = { _, data in
    host.windowCloseRequested(surface(data))
    return 1  // the host hides or keeps it
}
