"""The real smartico-sim and smarticod as subprocesses, for the client's tests.

Binaries: $SMARTICOD_BIN and $SMARTICO_SIM_BIN, else <repo>/.build/debug/smarticod and
smartico-sim (`swift build` makes them). Every wait is bounded.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

REPO = Path(__file__).resolve().parents[3]

try:
    import smarticod  # noqa: F401  (installed: pip install ./clients/python)
except ImportError:  # run from the tree without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
LABEL_KEY = "6816f0c2-1a2b-4c3d-8e9f-0a1b2c3d4e5f-2"


def binary(variable: str, name: str) -> str:
    path = os.environ.get(variable) or str(REPO / ".build" / "debug" / name)
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"{name} not found at {path}: build it (swift build) or set ${variable}")
    return path


def wait_until(condition: Callable[[], Any], timeout: float = 15.0, interval: float = 0.05) -> Any:
    """Polls ``condition`` until it returns something truthy (returned) or ``timeout`` passes (None)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            return None
        time.sleep(interval)


def stop_process(process: Optional[subprocess.Popen], sig: int = signal.SIGTERM, timeout: float = 20.0) -> Optional[int]:
    """Sends ``sig`` and waits (SIGKILL after ``timeout``); the exit status."""
    if process is None:
        return None
    if process.poll() is None:
        try:
            process.send_signal(sig)
        except ProcessLookupError:
            pass
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait(timeout=10)
    return process.returncode


def line_request(path: str, request: Dict[str, Any], timeout: float = 15.0) -> Dict[str, Any]:
    """One NDJSON request on its own Unix socket connection; the answer object."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        s.sendall(json.dumps(request).encode() + b"\n")
        data = b""
        while b"\n" not in data:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            data += chunk
    return json.loads(data.split(b"\n", 1)[0])


class Sim:
    """``smartico-sim --port 0 --control DIR/sim.sock``."""

    def __init__(self, directory: str, extra: Optional[List[str]] = None) -> None:
        self.control_path = os.path.join(directory, "sim.sock")
        self.log_path = os.path.join(directory, "sim.log")
        self.log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [binary("SMARTICO_SIM_BIN", "smartico-sim"), "--port", "0", "--control", self.control_path] + (extra or []),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.log, env={"PATH": "/usr/bin:/bin"})
        lines = self._read_lines(3, timeout=20)
        if len(lines) != 3:
            self.stop()
            raise RuntimeError(f"smartico-sim did not print its three lines: {lines}; log: {self.log_text()}")
        self.ws_url = lines[1]

    def _read_lines(self, count: int, timeout: float) -> List[str]:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout
        data = b""
        while data.count(b"\n") < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                break
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
        return [line.decode() for line in data.split(b"\n")[:count] if line]

    @property
    def server_url(self) -> str:
        return self.ws_url + "?master&domain=test.example&version=1.0.0"

    def control(self, request: Dict[str, Any]) -> Dict[str, Any]:
        answer = line_request(self.control_path, request)
        if answer.get("ok") is not True:
            raise RuntimeError(f"simulator control {request} failed: {answer}")
        return answer

    def emit(self, kind: str, user: str = "alice") -> Dict[str, Any]:
        """Emits a push of ``kind`` to ``user`` (queued as pending for an engagement to an
        offline user); the message."""
        answer = self.control({"op": "emit", "kind": kind, "user": user})
        deliveries = answer.get("deliveries") or []
        if deliveries:
            return deliveries[0]["message"]
        pending = answer.get("queued_pending") or []
        if pending:
            return pending[0]
        raise RuntimeError(f"emit {kind} to {user} delivered nothing: {answer}")

    def emit_engagement(self, user: str = "alice") -> str:
        return self.emit("engagement", user)["engagement_uid"]

    def received(self, cids: Optional[List[int]] = None) -> List[Dict[str, Any]]:
        request: Dict[str, Any] = {"op": "received"}
        if cids is not None:
            request["cid"] = cids
        return [entry["message"] for entry in self.control(request)["messages"] if "message" in entry]

    def log_text(self) -> str:
        return Path(self.log_path).read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        stop_process(self.process, signal.SIGKILL)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.log.close()


class Daemon:
    """A configuration in a temp directory and ``smarticod --config`` started from it."""

    def __init__(self, directory: str) -> None:
        self.dir = directory
        self.socket_path = os.path.join(directory, "d.sock")
        self.state_dir = os.path.join(directory, "state")
        self.config_path = os.path.join(directory, "config.json")
        self.log_path = os.path.join(directory, "smarticod.log")
        self.process: Optional[subprocess.Popen] = None

    def write_config(self, url: str, user: Optional[str] = "alice", hash: Optional[str] = "h",
                     socket_options: Optional[Dict[str, Any]] = None,
                     journal: Optional[Dict[str, Any]] = None) -> None:
        user_object: Dict[str, Any] = {}
        if user is not None:
            user_object["ext_user_id"] = user
        if hash is not None:
            user_object["hash"] = hash
        config: Dict[str, Any] = {
            "server": {"url": url, "label_key": LABEL_KEY},
            "user": user_object,
            "session": {"connect_timeout_s": 5, "response_timeout_s": 5,
                        "reconnect": {"initial_ms": 50, "max_ms": 300, "multiplier": 2.0}},
            "socket": dict({"path": self.socket_path}, **(socket_options or {})),
            "state_dir": self.state_dir,
            "log": {"level": "info"},
        }
        if journal:
            config["journal"] = journal
        Path(self.config_path).write_text(json.dumps(config))

    def start(self) -> None:
        """Starts the daemon and waits (bounded) until its socket answers hello."""
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [binary("SMARTICOD_BIN", "smarticod"), "--config", self.config_path],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                env={"PATH": "/usr/bin:/bin"})

        def answers() -> bool:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"smarticod exited with {self.process.returncode}: {self.log_text()}")
            try:
                return line_request(self.socket_path, {"id": 1, "op": "hello"}, timeout=5).get("ok") is True
            except OSError:
                return False

        if not wait_until(answers, timeout=20):
            raise RuntimeError(f"smarticod did not answer on {self.socket_path} within 20 s: {self.log_text()}")

    def status(self) -> Dict[str, Any]:
        return line_request(self.socket_path, {"id": 1, "op": "status"})["result"]

    def wait_identified(self, user: str = "alice", timeout: float = 20.0) -> None:
        def identified() -> bool:
            status = self.status()
            u = status.get("user") or {}
            return status.get("state") == "ready" and u.get("ext_user_id") == user and u.get("identified") is True
        if not wait_until(identified, timeout=timeout):
            raise RuntimeError(f"smarticod did not identify {user} within {timeout} s: {self.status()}; {self.log_text()}")

    def stop(self, sig: int = signal.SIGTERM) -> Optional[int]:
        status = stop_process(self.process, sig)
        self.process = None
        return status

    def log_text(self) -> str:
        try:
            return Path(self.log_path).read_text(errors="replace")[-3000:]
        except OSError:
            return ""


class Rig:
    """A temp directory (short: Unix socket paths fit in 108 bytes), a simulator and a daemon,
    all removed by ``close``."""

    def __init__(self, sim_extra: Optional[List[str]] = None) -> None:
        self.dir = tempfile.mkdtemp(prefix="smpy-", dir="/tmp")
        os.chmod(self.dir, 0o755)  # a non-root peer must reach the socket
        self.sim: Optional[Sim] = None
        self.daemon = Daemon(self.dir)
        try:
            self.sim = Sim(self.dir, sim_extra)
        except BaseException:
            self.close()
            raise

    def start(self, **config: Any) -> Daemon:
        assert self.sim is not None
        self.daemon.write_config(self.sim.server_url, **config)
        self.daemon.start()
        return self.daemon

    def diagnostics(self) -> str:
        sim = self.sim.log_text() if self.sim else ""
        return f"\n--- smarticod log ---\n{self.daemon.log_text()}\n--- smartico-sim log ---\n{sim}"

    def close(self) -> None:
        self.daemon.stop(signal.SIGKILL)
        if self.sim is not None:
            self.sim.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
