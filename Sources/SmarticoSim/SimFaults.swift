import SmarticoProtocol

/// Persistent fault modes: set globally or per client through the control socket, until cleared.
/// A per-client value overrides the global one.
public struct SimFaultModes: Sendable, Equatable {
    /// Answer INIT with this errCode (and `rejectInitMessage`) instead of accepting it.
    public var rejectInit: Int64?
    public var rejectInitMessage: String?
    /// Answer IDENTIFY with this errCode instead of accepting it.
    public var rejectIdentify: Int64?
    public var rejectIdentifyMessage: String?
    /// Half-open: record what arrives, answer nothing, ping nothing, push nothing; TCP stays open.
    public var halfOpen: Bool?
    /// Answers (and the PONG to a client PING) are sent this many ms late.
    public var delayMs: Int64?
    /// Override of `SimConfig.uuidEcho`: true, every answer echoes; false, none does.
    public var echoUUID: Bool?
    /// Override of `SimConfig.withholdPong`: client PINGs get no PONG.
    public var withholdPong: Bool?
    /// Override of `SimConfig.quirks`.
    public var quirks: Bool?
    /// Fields merged into every successful answer with the class id (`answer_fields`): a hostile
    /// server's values, e.g. a `javascript:` `native_app_popup_url` in IDENTIFY's answer (6). An
    /// object member present in both (INIT's `settings`) is merged member by member.
    public var answerFields: [Int64: JSONObject]?

    public init() {}

    /// `self` where set, else `fallback`.
    func over(_ fallback: SimFaultModes) -> SimFaultModes {
        var m = self
        if m.rejectInit == nil { m.rejectInit = fallback.rejectInit; m.rejectInitMessage = fallback.rejectInitMessage }
        if m.rejectIdentify == nil {
            m.rejectIdentify = fallback.rejectIdentify
            m.rejectIdentifyMessage = fallback.rejectIdentifyMessage
        }
        if m.halfOpen == nil { m.halfOpen = fallback.halfOpen }
        if m.delayMs == nil { m.delayMs = fallback.delayMs }
        if m.echoUUID == nil { m.echoUUID = fallback.echoUUID }
        if m.withholdPong == nil { m.withholdPong = fallback.withholdPong }
        if m.quirks == nil { m.quirks = fallback.quirks }
        if m.answerFields == nil { m.answerFields = fallback.answerFields }
        return m
    }

    var isEmpty: Bool { self == SimFaultModes() }
}

/// One-shot actions on a connection: performed at once, or armed to replace the answer to the
/// next message with a given cid (`on_cid`).
public enum SimFaultAction: Sendable, Equatable {
    /// TCP close without a close frame.
    case closeAbruptly
    /// A close frame with this code and reason, then TCP close.
    case close(code: UInt16, reason: String)
    /// A text frame that is not valid JSON (`SimWire.malformedJSON`).
    case malformedJSON
    /// A frame the WebSocket layer cannot accept (`SimWire.malformedFrame`).
    case malformedFrame

    var output: SimOutput {
        switch self {
        case .closeAbruptly: .abort
        case .close(let code, let reason): .close(code: code, reason: reason)
        case .malformedJSON: .text(SimWire.malformedJSON)
        case .malformedFrame: .malformedFrame
        }
    }

    /// True when the action ends the connection.
    var closes: Bool {
        switch self {
        case .closeAbruptly, .close: true
        case .malformedJSON, .malformedFrame: false
        }
    }
}

/// A fault action waiting for a client message with `cid`.
public struct SimArmedFault: Sendable, Equatable {
    public var cid: Int64
    public var action: SimFaultAction
}
