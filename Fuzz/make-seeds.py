#!/usr/bin/env python3
"""Writes the seed corpora under Fuzz/Corpus/<target>/ (run once; the files are committed).

Sources: Tests/SmarticoProtocolTests/Fixtures (Smartico messages as the tests use them),
config.example.json and variants of it, the request lines of docs/socket-api.md, and frames,
upgrade answers and HTTP answers built here the way the simulator and real servers send them
(zlib for permessage-deflate). Each target's input layout is in its main.swift."""
import base64, hashlib, json, os, re, struct, sys, zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "Fuzz", "Corpus")


def write(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# --- frames --------------------------------------------------------------------------------
def frame(opcode, payload, fin=True, rsv=0, mask=None):
    b0 = (0x80 if fin else 0) | (rsv << 4) | opcode
    n = len(payload)
    m = 0x80 if mask else 0
    if n < 126:
        head = bytes([b0, m | n])
    elif n <= 0xFFFF:
        head = bytes([b0, m | 126]) + struct.pack(">H", n)
    else:
        head = bytes([b0, m | 127]) + struct.pack(">Q", n)
    if mask:
        payload = bytes(c ^ mask[i % 4] for i, c in enumerate(payload))
        head += mask
    return head + payload


def deflated(messages, wbits=15, reset=False):
    c = zlib.compressobj(6, zlib.DEFLATED, -wbits)
    out = []
    for m in messages:
        if reset:
            c = zlib.compressobj(6, zlib.DEFLATED, -wbits)
        d = c.compress(m) + c.flush(zlib.Z_SYNC_FLUSH)
        out.append(d[:-4] if d.endswith(b"\x00\x00\xff\xff") else d)
    return out


fixtures = os.path.join(ROOT, "Tests", "SmarticoProtocolTests", "Fixtures")
messages = {}
for name in sorted(os.listdir(fixtures)):
    with open(os.path.join(fixtures, name), "rb") as f:
        messages[name] = f.read()
engagement = json.dumps(json.loads(messages["110_client_engagement_event.json"]), separators=(",", ":")).encode()
ping = json.dumps(json.loads(messages["001_ping.json"]), separators=(",", ":")).encode()
KEY = b"\x37\xfa\x21\x3d"

for role, bit in (("client", 0), ("server", 1)):
    mask = KEY if role == "server" else None
    flags = bit | 0x80  # text as bytes, as the daemon
    write("fuzz-frames", f"{role}-text", bytes([flags, 0]) + frame(1, engagement, mask=mask))
    write("fuzz-frames", f"{role}-text-pieces", bytes([flags, 5]) + frame(1, ping, mask=mask) + frame(1, engagement, mask=mask))
    write("fuzz-frames", f"{role}-fragmented-ping-between", bytes([flags, 9]) + frame(1, engagement[:40], fin=False, mask=mask)
          + frame(9, b"hb", mask=mask) + frame(0, engagement[40:], mask=mask))
    write("fuzz-frames", f"{role}-binary-16bit-length", bytes([bit, 3]) + frame(2, bytes(range(256)) * 2, mask=mask))
    write("fuzz-frames", f"{role}-close-1000", bytes([bit, 0]) + frame(8, struct.pack(">H", 1000) + b"bye", mask=mask))
    write("fuzz-frames", f"{role}-close-empty", bytes([bit, 1]) + frame(10, b"", mask=mask) + frame(8, b"", mask=mask))
    write("fuzz-frames", f"{role}-bad-utf8", bytes([bit, 0]) + frame(1, b'{"a":"\xc3\x28"}', mask=mask))
    # permessage-deflate, context taken over from message to message
    d = deflated([engagement, ping, engagement])
    write("fuzz-frames", f"{role}-deflate-takeover", bytes([flags | 2 | 0x70, 7])
          + b"".join(frame(1, p, rsv=4, mask=mask) for p in d))
    d = deflated([engagement, engagement], wbits=9, reset=True)
    write("fuzz-frames", f"{role}-deflate-w9-no-takeover", bytes([bit | 2 | 4 | 8 | (1 << 4), 2])
          + b"".join(frame(1, p, rsv=4, mask=mask) for p in d))
    p = deflated([engagement * 3])[0]
    write("fuzz-frames", f"{role}-deflate-fragmented", bytes([flags | 2 | 0x70, 11]) + frame(1, p[:30], fin=False, rsv=4, mask=mask)
          + frame(0, p[30:], mask=mask))
    write("fuzz-frames", f"{role}-deflate-bomb", bytes([bit | 2 | 0x70, 0]) + frame(2, deflated([b"\0" * 300000])[0], rsv=4, mask=mask))

# --- handshake -----------------------------------------------------------------------------
key = "wVwCiewtCpFn7I5loY3rvg=="
accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
base = f"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n"
write("fuzz-handshake", "101-plain", b"\x00\x00" + (base + "\r\n").encode())
write("fuzz-handshake", "101-deflate", b"\x01\x03" + (base + "Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n").encode())
write("fuzz-handshake", "101-deflate-params", b"\x02\x06" + (base + "Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; "
      "client_no_context_takeover; server_max_window_bits=10; client_max_window_bits=10\r\n\r\n").encode())
write("fuzz-handshake", "101-deflate-w9-and-frames", b"\x03\x11" + (base + "Sec-WebSocket-Extensions: permessage-deflate; server_max_window_bits=9\r\n\r\n").encode()
      + b"".join(frame(1, p, rsv=4) for p in deflated([engagement, ping], wbits=9)))
write("fuzz-handshake", "101-subprotocol-and-frame", b"\x04\x00" + (base + "Sec-WebSocket-Protocol: smartico.v1\r\n\r\n").encode() + frame(1, ping))
write("fuzz-handshake", "101-lowercase-folded", b"\x01\x00" + (f"HTTP/1.1 101 OK\r\nupgrade: WebSocket\r\nconnection: keep-alive, upgrade\r\n"
      f"sec-websocket-accept: {accept}\r\nsec-websocket-extensions: permessage-deflate;client_max_window_bits=15\r\n\r\n").encode())
write("fuzz-handshake", "403-body", b"\x01\x02" + b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/html\r\nContent-Length: 38\r\n\r\n<html><body>Forbidden</body></html>\r\n")
write("fuzz-handshake", "426-chunked", b"\x00\x04" + b"HTTP/1.1 426 Upgrade Required\r\nSec-WebSocket-Version: 13\r\nTransfer-Encoding: chunked\r\n\r\n"
      b"1a\r\nOnly WebSocket version 13\r\n0\r\n\r\n")
write("fuzz-handshake", "502-close-delimited", b"\x00\x00" + b"HTTP/1.0 502 Bad Gateway\r\nServer: nginx\r\n\r\n<html>bad gateway</html>")
write("fuzz-handshake", "101-wrong-accept", b"\x00\x00" + (base.replace(accept, "dGhlIHNhbXBsZSBub25jZQ==") + "\r\n").encode())

# --- HTTP responses (GET 0, HEAD 1, POST 2, CONNECT 3) ------------------------------------------
api = json.dumps(json.loads(messages["http_response.json"]), separators=(",", ":")).encode()
write("fuzz-http-response", "200-content-length", b"\x02\x00" + b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(api) + api)
chunks = b"".join(b"%x\r\n%s\r\n" % (len(api[i:i + 40]), api[i:i + 40]) for i in range(0, len(api), 40))
write("fuzz-http-response", "200-chunked-ext-trailer", b"\x00\x07" + b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n".replace(b"gzip, ", b"")
      + chunks.replace(b"\r\n", b";ext=1\r\n", 1) + b"0\r\nX-Trailer: 1\r\n\r\n")
write("fuzz-http-response", "100-continue-then-204", b"\x02\x03" + b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\nDate: Sun, 29 Nov 2026 01:00:00 GMT\r\n\r\n")
write("fuzz-http-response", "http10-close-delimited", b"\x00\x00" + b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nhello until the end")
write("fuzz-http-response", "301-redirect", b"\x00\x01" + b"HTTP/1.1 301 Moved Permanently\r\nLocation: https://example.com/\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
write("fuzz-http-response", "head-with-length", b"\x01\x00" + b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n")
write("fuzz-http-response", "body-too-long", b"\x00\x00" + b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokextra")
write("fuzz-http-response", "400-json", b"\x02\x09" + b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: 42\r\n"
      b"Connection: keep-alive\r\n\r\n" + b'{"errCode":400,"errMsg":"bad label key"}\r\n')
write("fuzz-http-response", "connect-200", b"\x03\x00" + b"HTTP/1.1 200 Connection established\r\n\r\n")
write("fuzz-http-response", "connect-200-proxy-agent", b"\x03\x04" + b"HTTP/1.0 200 OK\r\nProxy-Agent: squid/6.6\r\n\r\n")
write("fuzz-http-response", "connect-407", b"\x03\x02" + b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"proxy\"\r\n"
      b"Content-Length: 13\r\n\r\nAccess denied")

# --- JSON / server messages ----------------------------------------------------------------
for name, data in messages.items():
    if name.startswith(("0", "1", "2", "5", "7", "http_response")):
        write("fuzz-json-protocol", name.rsplit(".", 1)[0], data)
write("fuzz-json-protocol", "escapes-and-numbers", '{"cid":-0,"s":"\\u00e9\\ud83d\\ude00\\n\\"","n":[1e308,-1.5E-3,0,12345678901234567890],"o":{"a":null,"a":true}}')
write("fuzz-json-protocol", "110-compact-whitespace", b' \r\n' + engagement + b'\n')

# --- socket requests -----------------------------------------------------------------------
with open(os.path.join(ROOT, "docs", "socket-api.md"), encoding="utf-8") as f:
    doc = f.read()
lines = []
for m in re.finditer(r'\{"(?:id|op)"[^\n`]*', doc):
    text = m.group(0)
    for end in range(len(text), 0, -1):
        try:
            v = json.loads(text[:end])
        except ValueError:
            continue
        if isinstance(v, dict) and "op" in v and text[:end] not in lines:
            lines.append(text[:end])
        break
lines += [
    '{"id":3,"op":"identify","ext_user_id":"user-42","hash":"0123abcd"}',
    '{"id":4,"op":"push_token","token":"fcm:abc","status":1,"platform":5,"app_package_id":"com.example"}',
    '{"id":5,"op":"language","language":"pt-br"}',
    '{"id":6,"op":"event","event_type":"page_view","payload":{"page":"/lobby","n":1.5}}',
    '{"id":7,"op":"push_report","kind":"action","engagement_uid":"e-1","message_id":123,"action":"dp:gf","user_ext_id":"u"}',
    '{"id":8,"op":"api","call":"missions.list","args":{},"raw":true,"timeout_ms":2000}',
    '{"id":9,"op":"log_level","level":"debug"}',
    '{"id":10,"op":"send","message":{"cid":9,"eventType":"x","payload":{}}}',
    '{"id":11,"op":"bridge","message":{"bcid":4,"dp":"dp:gf_levels"}}',
    '{"id":12,"op":"metrics"}', '{"op":"unsubscribe"}', '{"op":"logout"}', '{"op":"login"}',
]
lines = [l for l in lines if "…" not in l and "<" not in l]
for i in range(0, len(lines), 4):
    group = lines[i:i + 4]
    write("fuzz-socket-request", "doc-%02d" % (i // 4), bytes([0, (i * 7) % 256]) + "\n".join(group).encode() + b"\r\n")
write("fuzz-socket-request", "long-line-256", bytes([1, 3]) + b'{"op":"event","event_type":"' + b"x" * 300 + b'"}\n{"op":"status"}\n')

# --- config --------------------------------------------------------------------------------
with open(os.path.join(ROOT, "config.example.json"), "rb") as f:
    example = f.read()
write("fuzz-config", "config.example.json", example)
c = json.loads(example)
minimal = {"server": {"label_key": c["server"]["label_key"]}}
write("fuzz-config", "minimal", json.dumps(minimal))
v = json.loads(example)
v["server"].update(url="wss://api.example.com/websocket/services", brand_key="brand", headers={"X-Env": "staging"},
                   proxy="http://user:secret@proxy.example:3128", compression=False)
v["server"]["tls"] = {"ca_file": "/etc/ssl/certs/ca.pem", "pinned_spki_sha256": ["47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="]}
v["user"].update(ext_user_id="user-42", hash="deadbeef")
v["http"]["public_url"] = "https://papi.example.com/"
v["log"]["level"] = "debug"
write("fuzz-config", "everything-set", json.dumps(v, indent=1))
v = json.loads(example)
v["user"].update(ext_user_id="user-42", hash=None, hash_command=["/usr/bin/smartico-hash", "--user"], hash_command_env=["A=1"])
v["session"]["reconnect"] = {"initial_ms": 100, "max_ms": 100, "multiplier": 1.0}
write("fuzz-config", "hash-command", json.dumps(v))
write("fuzz-config", "errors-many", b'\xef\xbb\xbf{"server":{"label_key":"x","url":"http://a","unknown":1,"compression":"yes"},'
      b'"session":{"keepalive_s":-1,"keepalive_s":2},"socket":{"mode":"999"},"log":{"level":"loud"}}')
write("fuzz-config", "syntax-error", example.replace(b'"compression": true\n', b'"compression": true,\n', 1))
