// Permissions with real credentials (socket-api.md, "Permissions"): the server runs in this
// process (as root in CI), its clients run as other uids and groups in child processes
// (`setpriv` + a small python3 NDJSON client), so SO_PEERCRED and SO_PEERGROUPS are the kernel's.
import Foundation
import Testing
import SmarticoProtocol
import SmarticoSocketAPI
import SmarticoTestSupport
import Transport
@testable import SmarticoDaemon

/// A socket API client in a child process with other credentials.
struct ForeignPeer {
    var uid: UInt32
    var gid: UInt32
    /// Supplementary groups (none: `--clear-groups`).
    var groups: [UInt32] = []

    /// The client (`python3 peer.py MODE SOCKET …`): `calls PATH LINE…` sends each line on one connection and prints the response to
    /// it (event lines are skipped; `{"eof":true}` when the daemon closed; a line `WAIT FILE` waits
    /// up to 20 s for FILE to exist instead); `conns PATH N` opens N
    /// connections, then sends `hello` on each and prints the first line each one gets.
    static let script = #"""
        import json, os, socket, sys, time
        mode, path = sys.argv[1], sys.argv[2]
        def connect():
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(10)
            s.connect(path)
            return s, s.makefile("rb")
        def response(f):
            while True:
                try:
                    line = f.readline()
                except OSError:
                    line = b""
                if not line:
                    return '{"eof":true}'
                if "ok" in json.loads(line):
                    return line.decode().strip()
        if mode == "calls":
            s, f = connect()
            for line in sys.argv[3:]:
                if line.startswith("WAIT "):
                    deadline = time.time() + 20
                    while not os.path.exists(line[5:]) and time.time() < deadline:
                        time.sleep(0.01)
                    continue
                try:
                    s.sendall(line.encode() + b"\n")
                except OSError:
                    pass
                print(response(f), flush=True)
        elif mode == "flood":
            # flood PATH CONNS N LINE [HOLD]: N copies of LINE ({id} numbered) on each of CONNS
            # connections, nothing read; then (after HOLD exists, up to 20 s) all closed.
            conns, n, template = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
            held, sent = [connect() for _ in range(conns)], 0
            for s, f in held:
                data = b"".join(template.replace("{id}", str(i + 1)).encode() + b"\n" for i in range(n))
                try:
                    s.sendall(data)
                    sent += n
                except OSError:
                    pass
            print(json.dumps({"sent": sent}), flush=True)
            if len(sys.argv) > 6:
                deadline = time.time() + 20
                while not os.path.exists(sys.argv[6]) and time.time() < deadline:
                    time.sleep(0.01)
            for s, f in held:
                s.close()
        elif mode == "hold":
            # hold PATH CONNS BYTES N HOLD: on each of CONNS connections, BYTES bytes of an
            # unfinished line (no newline; 0: none) or N status requests never read; then waits for
            # HOLD (up to 60 s) and prints how many connections the daemon closed, and the errors.
            conns, size, n, hold = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
            held = []
            for _ in range(conns):
                try:
                    held.append(connect())
                except OSError:
                    break
            for s, f in held:
                s.setblocking(False)
                data = b'{"id":1,"op":"hello","pad":"' + b"x" * size if size else b'{"id":1,"op":"status"}\n' * n
                sent = 0
                # A socket the daemon stopped reading is left after 0.2 s.
                deadline = time.time() + 0.2
                while sent < len(data) and time.time() < deadline:
                    try:
                        sent += s.send(data[sent:])
                    except BlockingIOError:
                        time.sleep(0.01)
                    except OSError:
                        break
            print(json.dumps({"opened": len(held)}), flush=True)
            deadline = time.time() + 60
            while not os.path.exists(hold) and time.time() < deadline:
                time.sleep(0.05)
            closed, errors = 0, set()
            for s, f in held:
                s.setblocking(True)
                s.settimeout(0.05)
                tail = b""
                try:
                    while True:
                        chunk = s.recv(1 << 20)
                        if not chunk:
                            closed += 1
                            break
                        tail = (tail + chunk)[-4096:]
                except (socket.timeout, OSError) as e:
                    if isinstance(e, ConnectionResetError):
                        closed += 1
                for line in tail.split(b"\n"):
                    if b'"error"' in line:
                        try:
                            errors.add(json.loads(line)["error"]["code"])
                        except ValueError:
                            pass
                s.close()
            print(json.dumps({"closed": closed, "errors": sorted(errors)}), flush=True)
        elif mode == "conns":
            held = [connect() for _ in range(int(sys.argv[3]))]
            for i, (s, f) in enumerate(held):
                try:
                    s.sendall(b'{"id":%d,"op":"hello"}\n' % i)
                except OSError:
                    pass
                print(response(f), flush=True)
        else:
            sys.exit("unknown mode " + mode)
        """#

    /// Runs the client (bounded by `timeout`) and returns its output lines, parsed.
    func run(dir: String, _ arguments: [String], timeoutSeconds: Int = 30) async throws -> [JSONValue] {
        let scriptPath = dir + "/peer.py"
        if !FileManager.default.fileExists(atPath: scriptPath) {
            try Data(Self.script.utf8).write(to: URL(fileURLWithPath: scriptPath))
            chmod(scriptPath, 0o644)
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/timeout")
        let groupArgument = groups.isEmpty ? "--clear-groups" : "--groups=" + groups.map(String.init).joined(separator: ",")
        p.arguments = ["\(timeoutSeconds)", "/usr/bin/setpriv", "--reuid=\(uid)", "--regid=\(gid)", groupArgument,
                       "/usr/bin/python3", scriptPath] + arguments
        p.environment = ["PATH": "/usr/bin:/bin"]
        let out = Pipe()
        let err = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = FileHandle.nullDevice
        try p.runSerialized()
        let (stdout, stderr) = await TestExecutables.onThread { () -> (Data, Data) in
            let stdout = out.fileHandleForReading.readDataToEndOfFile()
            let stderr = err.fileHandleForReading.readDataToEndOfFile()
            p.waitForExit(timeout: .seconds(timeoutSeconds + 10))
            return (stdout, stderr)
        }
        guard p.terminationStatus == 0 else {
            throw SocketTestFailure("the client as uid \(uid) failed (\(p.terminationStatus)): \(String(decoding: stderr, as: UTF8.self))")
        }
        return try String(decoding: stdout, as: UTF8.self).split(separator: "\n").map { try JSONValue(parsing: Array($0.utf8)) }
    }

    /// `calls`: one connection, one response per line.
    func calls(_ rig: SocketTestRig, _ lines: String...) async throws -> [JSONValue] {
        try await calls(rig, lines)
    }

    func calls(_ rig: SocketTestRig, _ lines: [String]) async throws -> [JSONValue] {
        try await run(dir: rig.dir, ["calls", rig.path] + lines)
    }
}

/// A rig whose socket other uids can reach: mode 0666 in a world-searchable directory.
private func openRig(
    _ configuration: SocketAPIServer.Configuration = SocketAPIServer.Configuration(), store: SmarticoStore? = nil,
    dir: String? = nil
) async throws -> SocketTestRig {
    let dir = try dir ?? makeSocketTempDir()
    chmod(dir, 0o755)
    return try await SocketTestRig.start(configuration: configuration, store: store, dir: dir, mode: 0o666)
}

private let identifyLine = #"{"id":1,"op":"identify","ext_user_id":"victim-user"}"#

@Suite(.awaitsCleanup) struct SocketAPIPermissionTests {
    /// Every data API call from a peer of the read role: the calls that change something are refused
    /// with `not_permitted` naming the call and never reach the session; the reads go through.
    @Test func dataAPICallsTakeTheirCallsRole() async throws {
        let rig = try await openRig()
        defer { cleanUpAfterTest { await rig.stop() } }
        let calls = DataAPICatalog.calls
        try #require(calls.contains { $0.role == .control } && calls.contains { $0.role == .read })
        let lines = calls.enumerated().map { i, spec in
            let o: JSONObject = ["id": .number(i), "op": "api", "call": .string(spec.name), "args": .object(spec.placeholderArgs)]
            return String(decoding: o.serialized(), as: UTF8.self)
        }
        let answers = try await ForeignPeer(uid: 65534, gid: 65534).calls(rig, lines)
        try #require(answers.count == calls.count, "\(answers)")
        for (spec, answer) in zip(calls, answers) {
            if spec.role == .control {
                #expect(answer["error"]?["code"] == "not_permitted", "\(spec.name): \(answer)")
                let message = answer["error"]?["message"]?.stringValue ?? ""
                #expect(message.contains("call \"\(spec.name)\"") && message.contains("uid 65534"), "\(message)")
            } else {
                #expect(answer["ok"] == true && answer["result"]?["call"] == .string(spec.name), "\(spec.name): \(answer)")
            }
        }
        let reached = rig.handler.calls.withLock { $0 }.compactMap { call -> String? in
            if case .api(let r) = call { r.call } else { nil }
        }
        #expect(reached == calls.filter { $0.role == .read }.map(\.name))
    }

    @Test func controlIsDeniedByDefaultToOtherUIDs() async throws {
        let rig = try await openRig()
        defer { cleanUpAfterTest { await rig.stop() } }
        let nobody = ForeignPeer(uid: 65534, gid: 65534)
        let answers = try await nobody.calls(
            rig, identifyLine, #"{"id":2,"op":"send","message":{"cid":500}}"#, #"{"id":3,"op":"hello"}"#,
            #"{"id":4,"op":"status"}"#, #"{"id":5,"op":"subscribe"}"#, #"{"id":6,"op":"unsubscribe"}"#)
        try #require(answers.count == 6, "\(answers)")
        for refused in answers.prefix(2) {
            #expect(refused["error"]?["code"] == "not_permitted", "\(refused)")
        }
        let message = answers[0]["error"]?["message"]?.stringValue ?? ""
        for part in [#"op "identify""#, "uid 65534", "gid 65534", "add uid 65534 to socket.control_uids", "socket.control_gids"] {
            #expect(message.contains(part), "\(part) in \(message)")
        }
        #expect(answers[1]["error"]?["message"]?.stringValue?.contains(#"op "send""#) == true)
        #expect(answers.dropFirst(2).allSatisfy { $0["ok"] == true }, "\(answers)")
        // Nothing the refused peer asked reached the session.
        #expect(rig.handler.calls.withLock { $0 } == [.hello, .status])

        // Root (this process) has control with the same configuration.
        let root = try await rig.connect()
        let ok = try await root.call(identifyLine, id: 1)
        #expect(ok["ok"] == true, "\(ok)")
    }

    @Test func controlUIDsGrantControl() async throws {
        let rig = try await openRig(.init(controlUIDs: [4242]))
        defer { cleanUpAfterTest { await rig.stop() } }
        let listed = try await ForeignPeer(uid: 4242, gid: 4242).calls(rig, identifyLine)
        #expect(listed.first?["ok"] == true, "\(listed)")
        let other = try await ForeignPeer(uid: 4243, gid: 4242).calls(rig, identifyLine)
        #expect(other.first?["error"]?["code"] == "not_permitted", "\(other)")
    }

    @Test func controlGIDsMatchThePrimaryGroupAndSupplementaryGroups() async throws {
        let rig = try await openRig(.init(controlGIDs: [4300]))
        defer { cleanUpAfterTest { await rig.stop() } }
        let primary = try await ForeignPeer(uid: 4244, gid: 4300).calls(rig, identifyLine)
        #expect(primary.first?["ok"] == true, "primary group: \(primary)")
        // The group is only a supplementary one (as `usermod -aG` makes it).
        let supplementary = try await ForeignPeer(uid: 4245, gid: 4301, groups: [4310, 4300]).calls(rig, identifyLine)
        #expect(supplementary.first?["ok"] == true, "supplementary group: \(supplementary)")
        let neither = try await ForeignPeer(uid: 4246, gid: 4301, groups: [4302]).calls(rig, identifyLine)
        #expect(neither.first?["error"]?["code"] == "not_permitted", "\(neither)")
        #expect(neither.first?["error"]?["message"]?.stringValue?.contains("uid 4246 (gid 4301)") == true, "\(neither)")
    }

    @Test func durableNamesBelongToTheUIDThatMadeThem() async throws {
        let dir = try makeSocketTempDir()
        let store = try await SmarticoStore.open(directory: dir + "/state")
        let rig = try await openRig(.init(maxDurablePerUID: 2), store: store, dir: dir)
        defer { cleanUpAfterTest { await rig.stop(); await store.close() } }
        try await journalAndPublish(5, store: store, server: rig.server)
        let owner = ForeignPeer(uid: 4242, gid: 4242)
        let other = ForeignPeer(uid: 4243, gid: 4243)

        let made = try await owner.calls(rig, #"{"id":1,"op":"subscribe","durable":"kiosk","since":1}"#, #"{"id":2,"op":"ack","seq":3}"#)
        #expect(made.map { $0["ok"] } == [true, true], "\(made)")
        #expect(made.last?["result"]?["cursor"] == 3)
        #expect(try await store.cursorOwner("kiosk") == 4242)

        // Another uid can neither take it nor forget it.
        let taken = try await other.calls(
            rig, #"{"id":1,"op":"subscribe","durable":"kiosk"}"#, #"{"id":2,"op":"forget","durable":"kiosk"}"#)
        #expect(taken.map { $0["error"]?["code"] } == ["not_permitted", "not_permitted"], "\(taken)")
        #expect(taken.first?["error"]?["message"]?.stringValue?.contains("belongs to uid 4242, not to uid 4243") == true, "\(taken)")
        #expect(try await store.cursor("kiosk") == 3)

        // Root may: it resumes after the owner's cursor, and the name stays the owner's.
        let root = try await rig.connect()
        let subscribed = try await root.call(#"{"id":1,"op":"subscribe","durable":"kiosk"}"#, id: 1)
        #expect(subscribed["ok"] == true, "\(subscribed)")
        try await waitUntil("events 4 and 5") { root.eventSeqs == [4, 5] }
        let acked = try await root.call(#"{"id":2,"op":"ack","seq":5}"#, id: 2)
        #expect(acked["result"]?["cursor"] == 5, "\(acked)")
        #expect(try await store.cursorOwner("kiosk") == 4242)
        await root.close()

        // forget: the owner deletes its name; a second time is a bad_request naming it.
        let forgotten = try await owner.calls(
            rig, #"{"id":1,"op":"forget","durable":"kiosk"}"#, #"{"id":2,"op":"forget","durable":"kiosk"}"#)
        #expect(forgotten.first?["ok"] == true, "\(forgotten)")
        #expect(forgotten.last?["error"]?["code"] == "bad_request", "\(forgotten)")
        #expect(forgotten.last?["error"]?["message"]?.stringValue?.contains(#"no durable subscription named "kiosk""#) == true)
        #expect(try await store.cursor("kiosk") == nil)
    }

    @Test func anAckOnANameAnotherUIDOwnsNowIsRefused() async throws {
        let dir = try makeSocketTempDir()
        let store = try await SmarticoStore.open(directory: dir + "/state")
        let rig = try await openRig(store: store, dir: dir)
        defer { cleanUpAfterTest { await rig.stop(); await store.close() } }
        try await journalAndPublish(3, store: store, server: rig.server)
        // uid 4242 subscribes with "app" and stays connected; meanwhile root forgets the name and
        // uid 4243 makes it again: 4242's ack is refused.
        let go = dir + "/go"
        async let owner = ForeignPeer(uid: 4242, gid: 4242).calls(
            rig, #"{"id":1,"op":"subscribe","durable":"app"}"#, "WAIT " + go, #"{"id":2,"op":"ack","seq":2}"#)
        #expect(try await eventually { try await store.cursorOwner("app") == 4242 })
        let root = try await rig.connect()
        #expect(try await root.call(#"{"id":1,"op":"forget","durable":"app"}"#, id: 1)["ok"] == true)
        let taken = try await ForeignPeer(uid: 4243, gid: 4243).calls(rig, #"{"id":1,"op":"subscribe","durable":"app","since":0}"#)
        #expect(taken.first?["ok"] == true, "\(taken)")
        #expect(FileManager.default.createFile(atPath: go, contents: nil), "could not create \(go)")
        let answers = try await owner
        #expect(answers.first?["ok"] == true, "\(answers)")
        #expect(answers.last?["error"]?["code"] == "not_permitted", "\(answers)")
        #expect(try await store.cursor("app") == 0)
        // Root may ack any name.
        #expect(try await root.call(#"{"id":2,"op":"subscribe","durable":"app"}"#, id: 2)["ok"] == true)
        #expect(try await root.call(#"{"id":3,"op":"ack","seq":2}"#, id: 3)["result"]?["cursor"] == 2)
        #expect(try await store.cursorOwner("app") == 4243)
    }

    @Test func aNameMadeBeforeOwnersIsClaimedByTheFirstUIDThatUsesIt() async throws {
        let dir = try makeSocketTempDir()
        let store = try await SmarticoStore.open(directory: dir + "/state")
        let rig = try await openRig(store: store, dir: dir)
        defer { cleanUpAfterTest { await rig.stop(); await store.close() } }
        try await journalAndPublish(3, store: store, server: rig.server)
        try await store.setCursor("legacy", 1)  // no uid: as a schema v1 name
        #expect(try await store.cursorOwner("legacy") == nil)
        let claimed = try await ForeignPeer(uid: 4242, gid: 4242).calls(
            rig, #"{"id":1,"op":"subscribe","durable":"legacy"}"#, #"{"id":2,"op":"ack","seq":2}"#)
        #expect(claimed.map { $0["ok"] } == [true, true], "\(claimed)")
        #expect(try await store.cursorOwner("legacy") == 4242)
        let late = try await ForeignPeer(uid: 4243, gid: 4243).calls(rig, #"{"id":1,"op":"subscribe","durable":"legacy"}"#)
        #expect(late.first?["error"]?["code"] == "not_permitted", "\(late)")
    }

    @Test func aUIDKeepsAtMostMaxDurablePerUIDNames() async throws {
        let dir = try makeSocketTempDir()
        let store = try await SmarticoStore.open(directory: dir + "/state")
        let rig = try await openRig(.init(maxDurablePerUID: 2), store: store, dir: dir)
        defer { cleanUpAfterTest { await rig.stop(); await store.close() } }
        try await journalAndPublish(2, store: store, server: rig.server)
        let peer = ForeignPeer(uid: 4250, gid: 4250)
        let answers = try await peer.calls(
            rig,
            #"{"id":1,"op":"subscribe","durable":"a"}"#, #"{"id":2,"op":"unsubscribe"}"#,
            #"{"id":3,"op":"subscribe","durable":"b"}"#, #"{"id":4,"op":"unsubscribe"}"#,
            #"{"id":5,"op":"subscribe","durable":"c"}"#,
            #"{"id":6,"op":"forget","durable":"a"}"#,
            #"{"id":7,"op":"subscribe","durable":"c"}"#)
        try #require(answers.map { $0["ok"] } == [true, true, true, true, false, true, true], "\(answers)")
        #expect(answers[4]["error"]?["code"] == "queue_full")
        let message = answers[4]["error"]?["message"]?.stringValue ?? ""
        #expect(message.contains("socket.max_durable_per_uid") && message.contains("forget") && message.contains("2 names"), "\(message)")
        // Another uid has its own allowance.
        let other = try await ForeignPeer(uid: 4251, gid: 4251).calls(rig, #"{"id":1,"op":"subscribe","durable":"d"}"#)
        #expect(other.first?["ok"] == true, "\(other)")
    }

    @Test func smarticoctlForgetDeletesAName() async throws {
        let dir = try makeSocketTempDir()
        let store = try await SmarticoStore.open(directory: dir + "/state")
        let rig = try await CtlRig.start(store: store, dir: dir)
        defer { cleanUpAfterTest { await rig.stop(); await store.close() } }
        try await journalAndPublish(2, store: store, server: rig.server)
        #expect(try await store.claimCursor("kiosk", uid: 0, start: 1) == 1)
        let forgotten = try await rig.ctl(["forget", "kiosk"])
        #expect(forgotten.status == 0, "\(forgotten)")
        #expect(forgotten.stdoutLines == ["forgotten"], "\(forgotten)")
        #expect(try await store.cursor("kiosk") == nil)
        let again = try await rig.ctl(["forget", "kiosk"])
        #expect(again.status == 1, "\(again)")
        #expect(again.stderr.contains("bad_request") && again.stderr.contains("kiosk"), "\(again)")
    }

    @Test func connectionsPerUIDAreCapped() async throws {
        let rig = try await openRig(.init(maxPeersPerUID: 3))
        defer { cleanUpAfterTest { await rig.stop() } }
        let answers = try await ForeignPeer(uid: 65534, gid: 65534).run(dir: rig.dir, ["conns", rig.path, "5"])
        try #require(answers.count == 5, "\(answers)")
        #expect(answers.prefix(3).allSatisfy { $0["ok"] == true }, "\(answers)")
        for refused in answers.suffix(2) {
            #expect(refused["error"]?["code"] == "too_many_connections", "\(refused)")
            #expect(refused["error"]?["message"]?.stringValue?.contains("uid 65534 already holds 3 connections") == true, "\(refused)")
        }
        // Once they are gone, the uid may connect again; root is not capped per uid.
        let again = try await ForeignPeer(uid: 65534, gid: 65534).run(dir: rig.dir, ["conns", rig.path, "3"])
        #expect(again.allSatisfy { $0["ok"] == true }, "\(again)")
        var roots: [SocketTestClient] = []
        for i in 0..<6 {
            let client = try await rig.connect()
            #expect(try await client.call(#"{"id":\#(i),"op":"hello"}"#, id: .number(Int64(i)))["ok"] == true)
            roots.append(client)
        }
    }

    @Test func allPeersTogetherAreCappedToKeepDescriptorsInReserve() async throws {
        let rig = try await openRig(.init(maxPeers: 4))
        defer { cleanUpAfterTest { await rig.stop() } }
        var held: [SocketTestClient] = []
        for i in 0..<4 {
            let client = try await rig.connect()
            #expect(try await client.call(#"{"id":\#(i),"op":"hello"}"#, id: .number(Int64(i)))["ok"] == true)
            held.append(client)
        }
        let refused = try await rig.connect()
        try await waitUntil("the refused connection to close") { refused.isClosed }
        let line = try refused.json().first
        #expect(line?["error"]?["code"] == "too_many_connections", "\(String(describing: line))")
        #expect(line?["error"]?["message"]?.stringValue?.contains("at most 4 local connections") == true)
        #expect(rig.server.connectionCount == 4)
        // One goes: room for one more.
        await held.removeFirst().close()
        try await waitUntil("the server to see the close") { rig.server.connectionCount == 3 }
        let next = try await rig.connect()
        #expect(try await next.call(#"{"id":9,"op":"hello"}"#, id: 9)["ok"] == true)
    }

    @Test func atMost64RequestsPendPerConnection() async throws {
        let rig = try await openRig()
        defer { cleanUpAfterTest { await rig.stop() } }
        let client = try await rig.connect()
        // The fake session answers a request after its timeout_ms.
        var lines = ""
        for i in 0..<65 { lines += #"{"id":\#(i),"op":"request","message":{"cid":500},"timeout_ms":3000}"# + "\n" }
        try await client.send(lines)
        let full = try await client.response(id: 64)
        #expect(full["error"]?["code"] == "queue_full", "\(full)")
        #expect(full["error"]?["message"]?.stringValue?.contains("(64)") == true, "\(full)")
        #expect(try client.responses().count == 1, "the first 64 are still pending")
        // Once they are answered there is room again.
        _ = try await client.response(id: 63, timeout: .seconds(20))
        let later = try await client.call(#"{"id":"later","op":"request","message":{"cid":500},"timeout_ms":1}"#, id: "later")
        #expect(later["ok"] == true, "\(later)")
    }
}
