"""WebSocket echo server for the Transport integration tests (an independent implementation:
the `websockets` package).

Usage: echo_server.py [--cert CHAIN --key KEY] [--no-deflate] [--host 127.0.0.1]
Prints the chosen port on the first line, then serves until killed.
Every text and binary message is echoed unchanged. The path /forbidden is refused with
403 and a text body; /close-1001 closes at once with 1001 "bye".
"""
import argparse
import asyncio
import http
import ssl
import sys

from websockets.asyncio.server import serve


async def echo(ws):
    if ws.request.path == "/close-1001":
        await ws.close(1001, "bye")
        return
    async for message in ws:
        await ws.send(message)


def process_request(connection, request):
    if request.path == "/forbidden":
        return connection.respond(http.HTTPStatus.FORBIDDEN, "no entry for this device: token rejected\n")
    return None


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--no-deflate", action="store_true")
    args = parser.parse_args()
    context = None
    if args.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.cert, args.key)
    async with serve(
        echo, args.host, 0, ssl=context, process_request=process_request,
        compression=None if args.no_deflate else "deflate",
        max_size=32 * 1024 * 1024, max_queue=4, ping_interval=None, write_limit=1 << 20,
    ) as server:
        port = server.sockets[0].getsockname()[1]
        print(port, flush=True)
        await asyncio.get_running_loop().create_future()


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
