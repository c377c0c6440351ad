"""A small HTTP/1.1 server for the HTTPClient tests (one response per connection).

Usage: http_server.py [--cert CHAIN --key KEY]
Prints its port on the first line. Paths:
  /length    200 with Content-Length, body "hello, length"
  /chunked   200 chunked, body "hello, " + "chunked" in several chunks
  /close     200 without length, body "hello, close" ended by closing the connection
  /big       200 with Content-Length 1 MiB of "x"
  /echo      200 echoing the request method, the X-Test header and the request body
  /redirect  302 to /length
  /slow      200 after 10 s
A request with "Connection: keep-alive" to /length, /echo or /redirect leaves the connection open
for the next one; /length says which connection served it (X-Connection: N, from 1).
"""
import argparse
import asyncio
import ssl
import sys


CONNECTIONS = 0


async def handle(reader, writer):
    global CONNECTIONS
    CONNECTIONS += 1
    number = CONNECTIONS
    while True:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            break
        keep = await answer(reader, writer, head, number)
        await writer.drain()
        if not keep:
            break
    writer.close()


async def answer(reader, writer, head, number):
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    body = b""
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    keep = headers.get("connection", "").lower() == "keep-alive" and target in ("/length", "/echo", "/redirect")
    if target == "/length":
        payload = b"hello, length"
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nX-Connection: %d\r\n\r\n" % (len(payload), number) + payload)
    elif target == "/chunked":
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for part in [b"hel", b"lo, ", b"chunked"]:
            writer.write(b"%x\r\n" % len(part) + part + b"\r\n")
            await writer.drain()
            await asyncio.sleep(0.01)
        writer.write(b"0\r\n\r\n")
    elif target == "/close":
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nhello, ")
        await writer.drain()
        await asyncio.sleep(0.01)
        writer.write(b"close")
    elif target == "/big":
        payload = b"x" * (1 << 20)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(payload) + payload)
    elif target == "/echo":
        payload = method.encode() + b" " + headers.get("x-test", "").encode() + b" " + body
        writer.write(b"HTTP/1.1 201 Created\r\nContent-Length: %d\r\nX-Echo: yes\r\n\r\n" % len(payload) + payload)
    elif target == "/redirect":
        writer.write(b"HTTP/1.1 302 Found\r\nLocation: /length\r\nContent-Length: 0\r\n\r\n")
    elif target == "/slow":
        await asyncio.sleep(10)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nslow")
    else:
        writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
    return keep


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cert")
    parser.add_argument("--key")
    args = parser.parse_args()
    context = None
    if args.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.cert, args.key)
    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=context)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


def exit_when_parent_goes():
    """The test runner holds our stdin open; EOF means it is gone: exit, leaving nothing behind."""
    import os
    import threading

    def watch():
        try:
            while sys.stdin.buffer.read(4096):
                pass
        finally:
            os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


if __name__ == "__main__":
    exit_when_parent_goes()
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
