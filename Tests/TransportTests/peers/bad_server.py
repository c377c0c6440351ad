"""A misbehaving WebSocket server for BadPeerTests, on raw sockets (standard library only).

Listens on 127.0.0.1 (port 0), prints its port on the first line and serves each connection on its own
thread. The request path names the scenario (GET /<scenario>). After a valid (or, for
wrong-accept, a deliberately wrong) 101 response the server writes the crafted bytes, then
reads what the client sends back until EOF or a timeout and prints one JSON line:

  {"scenario": ..., "close_code": 1002 | null, "close_payload": "hex", "frames": [[opcode, len], ...],
   "eof": true/false, "elapsed": seconds, "error": null | "..."}

`close_code` is the status code of the first Close frame the client sent (None if none);
`eof` says whether the client closed TCP within the wait. Every wait is bounded.
"""
import base64
import hashlib
import json
import os
import socket
import struct
import sys
import threading
import time

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
WAIT = float(sys.argv[1]) if len(sys.argv) > 1 else 8.0
print_lock = threading.Lock()


def frame(opcode, payload=b"", fin=True, rsv=0, mask=None, length=None):
    """A server frame; `length` overrides the announced payload length."""
    n = len(payload) if length is None else length
    b0 = (0x80 if fin else 0) | (rsv << 4) | opcode
    b1 = 0x80 if mask is not None else 0
    if n < 126:
        head = struct.pack("!BB", b0, b1 | n)
    elif n <= 0xFFFF:
        head = struct.pack("!BBH", b0, b1 | 126, n)
    else:
        head = struct.pack("!BBQ", b0, b1 | 127, n)
    if mask is not None:
        head += mask
        payload = bytes(c ^ mask[i % 4] for i, c in enumerate(payload))
    return head + payload


def close_frame(code, reason=b""):
    return frame(0x8, struct.pack("!H", code) + reason)


# Scenario name -> bytes written after the 101 (None: handled specially).
SCENARIOS = {
    # RFC 6455 5.1: a client MUST close on a masked frame from the server -> 1002.
    "masked": frame(0x1, b"hello", mask=b"\x01\x02\x03\x04"),
    # RSV2 without an extension that defines it -> 1002.
    "reserved-bits": frame(0x1, b"hello", rsv=0x2),
    # Opcode 3 is reserved -> 1002.
    "reserved-opcode": frame(0x3, b"hello"),
    # A Ping without FIN -> 1002.
    "fragmented-control": frame(0x9, b"ping", fin=False) + frame(0x0, b"more"),
    # A Ping with 126 bytes (limit 125) -> 1002.
    "ping-126": frame(0x9, b"x" * 126),
    # Invalid UTF-8 in one text frame -> 1007.
    "utf8": frame(0x1, b"caf\xc3\x28 is not UTF-8"),
    # Valid prefix in the first fragment, a truncated 3-byte sequence completed by a bad byte in
    # the second: only detectable across fragments -> 1007.
    "utf8-split": frame(0x1, b"abc\xe2\x82", fin=False) + frame(0x0, b"\x28def"),
    # The first fragment already contains an invalid byte, the rest never comes: the client must
    # fail fast (1007) without waiting for the message to end.
    "utf8-fail-fast": frame(0x1, b"ok\xff", fin=False),
    # Close code 1005 may not be sent on the wire -> 1002.
    "close-1005": close_frame(1005),
    # Close code 999 is below the valid range -> 1002.
    "close-999": close_frame(999),
    # Close code 2000 is unassigned -> 1002.
    "close-2000": close_frame(2000),
    # A 64-bit length of 2^63 (most significant bit set: invalid) -> 1002.
    "length-2-63": struct.pack("!BBQ", 0x82, 127, 1 << 63) + b"\x00" * 16,
    # A 64-bit length of 2^63 - 1 (valid encoding, absurd size) -> 1009, without allocating it.
    "length-2-63-minus-1": struct.pack("!BBQ", 0x82, 127, (1 << 63) - 1) + b"\x00" * 16,
    # The same announcement, 16 bytes of it, then the server closes TCP (for a client whose
    # limits allow such a frame: it must stream, not allocate what was announced) -> 1006.
    "length-2-63-minus-1-eof": struct.pack("!BBQ", 0x82, 127, (1 << 63) - 1) + b"\x00" * 16,
    # The handshake answer carries a wrong Sec-WebSocket-Accept; then a text frame follows.
    "wrong-accept": frame(0x1, b"must not be delivered"),
    # A header announcing 100 bytes, 10 of them, then the server closes TCP.
    "mid-frame-eof": frame(0x2, b"0123456789", length=100),
    # A header announcing 100 bytes, 10 of them, then silence (TCP stays open).
    "mid-frame-silent": frame(0x2, b"0123456789", length=100),
    # Control: a well-behaved server sending a text message and a normal close.
    "good": frame(0x1, b"hello") + close_frame(1000),
}


def read_request(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            raise EOFError("client closed during the request")
        data += chunk
        if len(data) > 65536:
            raise ValueError("request head too large")
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    path = lines[0].split(" ")[1]
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return path, headers, rest


def parse_client_frames(buf):
    """Parses (masked) client frames from buf; returns (frames, close_payload)."""
    frames, close_payload, i = [], None, 0
    while i + 2 <= len(buf):
        b0, b1 = buf[i], buf[i + 1]
        n = b1 & 0x7F
        j = i + 2
        if n == 126:
            if j + 2 > len(buf):
                break
            n = struct.unpack("!H", buf[j:j + 2])[0]
            j += 2
        elif n == 127:
            if j + 8 > len(buf):
                break
            n = struct.unpack("!Q", buf[j:j + 8])[0]
            j += 8
        key = b""
        if b1 & 0x80:
            key = buf[j:j + 4]
            j += 4
        if j + n > len(buf):
            break
        payload = buf[j:j + n]
        if key:
            payload = bytes(c ^ key[k % 4] for k, c in enumerate(payload))
        opcode = b0 & 0x0F
        frames.append([opcode, n, bool(b1 & 0x80)])
        if opcode == 0x8 and close_payload is None:
            close_payload = payload
        i = j + n
    return frames, close_payload


def serve(conn):
    started = time.monotonic()
    result = {"scenario": None, "close_code": None, "close_payload": None, "frames": [], "eof": False,
              "elapsed": None, "error": None}
    try:
        conn.settimeout(WAIT)
        path, headers, _ = read_request(conn)
        scenario = path.lstrip("/")
        result["scenario"] = scenario
        if scenario not in SCENARIOS:
            conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            raise ValueError("unknown scenario " + scenario)
        accept = base64.b64encode(hashlib.sha1(headers.get("sec-websocket-key", "").encode() + GUID).digest())
        if scenario == "wrong-accept":
            accept = base64.b64encode(hashlib.sha1(b"not the key" + GUID).digest())
        conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n" + SCENARIOS[scenario])
        if scenario in ("mid-frame-eof", "length-2-63-minus-1-eof"):
            conn.shutdown(socket.SHUT_WR)
        received = b""
        deadline = started + WAIT
        while time.monotonic() < deadline:
            conn.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = conn.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                result["eof"] = True
                break
            if not chunk:
                result["eof"] = True
                break
            received += chunk
            # A real server closes TCP once it has the client's Close: do so, so the client ends.
            frames, close_payload = parse_client_frames(received)
            if close_payload is not None and scenario not in ("mid-frame-silent",):
                try:
                    conn.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
        frames, close_payload = parse_client_frames(received)
        result["frames"] = frames
        if close_payload is not None:
            result["close_payload"] = close_payload.hex()
            if len(close_payload) >= 2:
                result["close_code"] = struct.unpack("!H", close_payload[:2])[0]
    except Exception as e:  # reported to the test, which fails with it
        result["error"] = "%s: %s" % (type(e).__name__, e)
    finally:
        result["elapsed"] = round(time.monotonic() - started, 3)
        conn.close()
        with print_lock:
            print(json.dumps(result), flush=True)


def main():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print(listener.getsockname()[1], flush=True)
    # Exit when the test process is gone (SIGTERM is the normal end): no orphaned server.
    parent = os.getppid()

    def watch_parent():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch_parent, daemon=True).start()
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            break
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
