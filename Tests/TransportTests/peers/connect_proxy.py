"""A minimal HTTP CONNECT proxy on loopback for the Transport tests.

Usage: connect_proxy.py [--user U --password P] [--refuse-all]
Prints its port on the first line, then the number of tunnels it opened on each
"tunnel HOST:PORT" line. With credentials, a request without the right
Proxy-Authorization gets 407; with --refuse-all every request gets 407.
"""
import argparse
import asyncio
import base64
import sys


async def pipe(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


def handler_for(args):
    expected = None
    if args.user is not None:
        token = base64.b64encode(f"{args.user}:{args.password}".encode()).decode()
        expected = "Basic " + token

    async def handle(reader, writer):
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        if method != "CONNECT":
            writer.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            writer.close()
            return
        if args.refuse_all or (expected is not None and headers.get("proxy-authorization") != expected):
            body = b"proxy credentials required\n"
            writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"test\"\r\n"
                         + b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
            await writer.drain()
            writer.close()
            return
        host, port = target.rsplit(":", 1)
        try:
            up_reader, up_writer = await asyncio.open_connection(host.strip("[]"), int(port))
        except OSError as e:
            writer.write(f"HTTP/1.1 502 Bad Gateway\r\nContent-Length: {len(str(e))}\r\n\r\n{e}".encode())
            writer.close()
            return
        print(f"tunnel {target}", flush=True)
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    return handle


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--user")
    parser.add_argument("--password", default="")
    parser.add_argument("--refuse-all", action="store_true")
    args = parser.parse_args()
    server = await asyncio.start_server(handler_for(args), "127.0.0.1", 0)
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
