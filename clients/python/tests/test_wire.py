"""What the client writes and how it reads answers, against a scripted peer on a real Unix
socket: the ``api`` op's request shape, and every error code's class (the daemon cannot be made
to answer each code on demand)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import unittest
from typing import Any, Callable, Dict, List

sys.path.insert(0, os.path.dirname(__file__))

import support  # noqa: E402,F401  (puts the tree's package on the path when not installed)

import smarticod  # noqa: E402
from smarticod import Client, ServerError, SmarticoError  # noqa: E402


class ScriptedPeer:
    """Accepts one connection; answers each request line with ``answer(request)`` (a list of lines)."""

    def __init__(self, answer: Callable[[Dict[str, Any]], List[Dict[str, Any]]]) -> None:
        self.dir = tempfile.mkdtemp(prefix="smpyw-", dir="/tmp")
        self.path = os.path.join(self.dir, "peer.sock")
        self.requests: List[Dict[str, Any]] = []
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(1)
        self.listener.settimeout(10)
        self.answer = answer
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            connection, _ = self.listener.accept()
        except OSError:
            return
        with connection:
            connection.settimeout(10)
            buffer = b""
            while True:
                try:
                    chunk = connection.recv(65536)
                except OSError:
                    return
                if not chunk:
                    return
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    request = json.loads(line)
                    self.requests.append(request)
                    out = b"".join(json.dumps(a).encode() + b"\n" for a in self.answer(request))
                    connection.sendall(out)

    def close(self) -> None:
        self.listener.close()
        self.thread.join(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


class WireTests(unittest.TestCase):
    def peer(self, answer: Callable[[Dict[str, Any]], List[Dict[str, Any]]]) -> ScriptedPeer:
        peer = ScriptedPeer(answer)
        self.addCleanup(peer.close)
        return peer

    def test_api_request_shape(self) -> None:
        peer = self.peer(lambda r: [{"id": r["id"], "ok": True, "result": {"missions": []}}])
        with Client(peer.path, timeout=10) as client:
            self.assertEqual(client.api("missions.list"), {"missions": []})
            client.api("inbox.list", {"limit": 20}, offset=40, raw=True)
        self.assertEqual(peer.requests[0], {"id": 1, "op": "api", "call": "missions.list", "args": {}})
        self.assertEqual(peer.requests[1], {"id": 2, "op": "api", "call": "inbox.list",
                                            "args": {"limit": 20, "offset": 40}, "raw": True})

    def test_every_error_code_has_its_class(self) -> None:
        codes = list(smarticod.ERRORS_BY_CODE) + ["some_future_code"]

        def answer(request: Dict[str, Any]) -> List[Dict[str, Any]]:
            code = request["event_type"]
            error: Dict[str, Any] = {"code": code, "message": f"the message of {code}"}
            if code == "server_error":
                error.update(errCode=100000, errMsg="hash is not valid")
            # An event before the answer is kept, not mistaken for it.
            return [{"event": "session", "seq": 3, "ts": 1, "data": {"state": "ready"}},
                    {"id": request["id"], "ok": False, "error": error}]

        peer = self.peer(answer)
        with Client(peer.path, timeout=10) as client:
            for code in codes:
                with self.assertRaises(SmarticoError) as caught:
                    client.event(code)
                error = caught.exception
                expected = smarticod.ERRORS_BY_CODE.get(code, SmarticoError)
                self.assertIs(type(error), expected, code)
                self.assertEqual((error.code, error.message, error.op), (code, f"the message of {code}", "event"))
                if isinstance(error, ServerError):
                    self.assertEqual((error.err_code, error.err_msg), (100000, "hash is not valid"))
            self.assertEqual(len(client._events), len(codes))
        self.assertEqual(sorted(smarticod.ERRORS_BY_CODE), sorted([
            "bad_json", "bad_request", "unknown_op", "line_too_long", "not_permitted", "not_ready",
            "server_error", "timeout", "queue_full", "storage_unavailable", "hash_command_failed", "too_many_connections", "internal",
            "not_implemented"]))

    def test_a_connection_refused_at_accept_raises_too_many_connections(self) -> None:
        def answer(request: Dict[str, Any]) -> List[Dict[str, Any]]:
            return [{"id": None, "ok": False, "error": {"code": "too_many_connections", "message": "uid 1000 already holds 64 connections"}}]
        peer = self.peer(answer)
        with Client(peer.path, timeout=10) as client:
            with self.assertRaises(smarticod.TooManyConnections):
                client.hello()

    def test_no_answer_within_the_timeout(self) -> None:
        peer = self.peer(lambda r: [])
        with Client(peer.path, timeout=0.3) as client:
            with self.assertRaises(smarticod.ClientTimeout):
                client.status()


if __name__ == "__main__":
    unittest.main()
