"""smartico-wrapper as a player sees it: a real X server (Xvfb), a session bus, the real smartico-sim
(its wrapper pages), the real smarticod and the real wrapper, driven with xdotool and looked at
with ImageMagick's import.

Binaries: $SMARTICOD_BIN, $SMARTICO_SIM_BIN (else <repo>/.build/debug/…) and $SMARTICO_WRAPPER_BIN
(else <repo>/Wrapper/.build/debug/smartico-wrapper). $SMARTICO_WRAPPER_SHOTS: a folder to copy
the screenshots into (docs/ when refreshing them). Every wait is bounded.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import unittest
import urllib.parse
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "clients" / "python" / "tests"))
from support import Rig, stop_process, wait_until  # noqa: E402


# How long something the wrapper starts may take to appear. On a fresh, cold machine the first
# WebKit start took 26 s (CI, 2026-12-07); a warm one takes under a second. Only failures wait this long.
APPEAR = 60.0


def wrapper_binary() -> str:
    path = os.environ.get("SMARTICO_WRAPPER_BIN") or str(REPO / "Wrapper" / ".build" / "debug" / "smartico-wrapper")
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"smartico-wrapper not found at {path}: swift build --package-path Wrapper, or set $SMARTICO_WRAPPER_BIN")
    return path


def start_session_bus() -> Tuple[str, int]:
    """A private session bus (GApplication's single instance): its address and pid."""
    bus = subprocess.run(["dbus-daemon", "--session", "--fork", "--print-address=1", "--print-pid=1"],
                         capture_output=True, text=True, timeout=20, check=True).stdout.split()
    return bus[0], int(bus[1])


def stop_session_bus(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass


class Screen:
    """Xvfb on a free display (-displayfd) and a private session bus (GApplication's single instance)."""

    def __init__(self, directory: str) -> None:
        read, write = os.pipe()
        self.xvfb = subprocess.Popen(["Xvfb", "-displayfd", str(write), "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
                                     pass_fds=(write,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(write)
        number = b""
        deadline = time.monotonic() + 20
        while not number.endswith(b"\n") and time.monotonic() < deadline:
            chunk = os.read(read, 16)
            if not chunk:
                break
            number += chunk
        os.close(read)
        if not number.strip():
            stop_process(self.xvfb)
            raise RuntimeError("Xvfb did not start")
        self.display = ":" + number.decode().strip()
        self.bus_address, self.bus_pid = start_session_bus()
        self.dir = directory

    def env(self) -> Dict[str, str]:
        return {"PATH": "/usr/bin:/bin", "HOME": self.dir, "DISPLAY": self.display,
                "DBUS_SESSION_BUS_ADDRESS": self.bus_address, "XDG_RUNTIME_DIR": self.dir,
                "GSK_RENDERER": "cairo"}

    def xdotool(self, *args: str, check: bool = False) -> str:
        result = subprocess.run(["xdotool", *args], env=self.env(), capture_output=True, text=True, timeout=20)
        if check and result.returncode != 0:
            raise RuntimeError(f"xdotool {args}: {result.stderr}")
        return result.stdout.strip()

    def visible(self, name: str) -> Optional[str]:
        """The id of a visible window whose title matches the regex `name`, or None."""
        out = self.xdotool("search", "--onlyvisible", "--name", name)
        return out.split()[0] if out else None

    def screenshot(self, name: str) -> Path:
        path = Path(self.dir) / name
        subprocess.run(["import", "-window", "root", str(path)], env=self.env(), check=True, timeout=30)
        shots = os.environ.get("SMARTICO_WRAPPER_SHOTS")
        if shots:
            shutil.copy(path, Path(shots) / name)
        return path

    def close(self) -> None:
        stop_process(self.xvfb)
        stop_session_bus(self.bus_pid)


class WaylandScreen:
    """A headless Weston (no X server: GTK and WebKit speak Wayland) and a private session bus.
    Weston runs with --debug for its screenshooter protocol (`weston-screenshooter`)."""

    def __init__(self, directory: str) -> None:
        self.dir = directory
        self.runtime = os.path.join(directory, "wl-runtime")
        os.makedirs(self.runtime, mode=0o700, exist_ok=True)
        self.socket = "wayland-smartico"
        self.log_path = os.path.join(directory, "weston.log")
        with open(self.log_path, "ab") as log:
            self.weston = subprocess.Popen(
                ["weston", "--backend=headless-backend.so", f"--socket={self.socket}", "--width=1280", "--height=800",
                 "--use-pixman", "--idle-time=0", "--debug"],
                env={"PATH": "/usr/bin:/bin", "HOME": directory, "XDG_RUNTIME_DIR": self.runtime},
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=directory)
        if not wait_until(lambda: os.path.exists(os.path.join(self.runtime, self.socket)), timeout=20):
            stop_process(self.weston)
            raise RuntimeError("Weston did not start: " + Path(self.log_path).read_text(errors="replace")[-2000:])
        self.bus_address, self.bus_pid = start_session_bus()

    def env(self) -> Dict[str, str]:
        return {"PATH": "/usr/bin:/bin", "HOME": self.dir, "WAYLAND_DISPLAY": self.socket, "GDK_BACKEND": "wayland",
                "DBUS_SESSION_BUS_ADDRESS": self.bus_address, "XDG_RUNTIME_DIR": self.runtime,
                "GSK_RENDERER": "cairo"}

    def screenshot(self, name: str) -> Path:
        """The whole output, through Weston's screenshooter (it writes wayland-screenshot-*.png)."""
        shots = Path(self.dir) / "wl-shots"
        shutil.rmtree(shots, ignore_errors=True)
        shots.mkdir()
        subprocess.run(["weston-screenshooter"], env=self.env(), cwd=shots,
                       capture_output=True, timeout=30)
        taken = sorted(shots.glob("wayland-screenshot-*.png"))
        path = Path(self.dir) / name
        if taken:
            shutil.move(str(taken[-1]), path)
            if os.environ.get("SMARTICO_WRAPPER_SHOTS"):
                shutil.copy(path, Path(os.environ["SMARTICO_WRAPPER_SHOTS"]) / name)
        return path

    def close(self) -> None:
        stop_process(self.weston)
        stop_session_bus(self.bus_pid)


def colours(path: Path) -> int:
    """How many distinct colours an image has (a blank or black screen has one)."""
    out = subprocess.run(["identify", "-format", "%k", str(path)], capture_output=True, text=True, timeout=30, check=True)
    return int(out.stdout.strip())


class Wrapper:
    def __init__(self, screen: Screen, socket_path: str, config: Dict[str, Any], log_name: str = "wrapper.log") -> None:
        self.screen = screen
        self.log_path = os.path.join(screen.dir, log_name)
        config_path = os.path.join(screen.dir, "wrapper.json")
        Path(config_path).write_text(json.dumps(config))
        self.args = [wrapper_binary(), "--socket", socket_path, "--config", config_path, "--log-level", "debug"]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(self.args, env=screen.env(), stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        if not wait_until(lambda: "connected to smarticod" in self.log(), timeout=APPEAR + 30):
            raise RuntimeError(f"the wrapper did not connect: {self.log()}")

    def log(self) -> str:
        try:
            return Path(self.log_path).read_text(errors="replace")
        except OSError:
            return ""

    def wait_log(self, pattern: str, timeout: float = APPEAR, count: int = 1) -> List[str]:
        found = wait_until(lambda: len(re.findall(pattern, self.log())) >= count and re.findall(pattern, self.log()), timeout=timeout)
        if not found:
            raise AssertionError(f"the wrapper did not log {pattern!r} ({count}×) within {timeout} s:\n{self.log()[-4000:]}")
        return found

    def stop(self, sig: int = signal.SIGTERM) -> Optional[int]:
        return stop_process(self.process, sig)


class WrapperTestCase(unittest.TestCase):
    wrapper_config: Dict[str, Any] = {}
    screen_class: Any = Screen

    def setUp(self) -> None:
        self.rig = Rig(sim_extra=["--http-port", "0"])
        self.addCleanup(self.rig.close)
        self.screen = self.screen_class(self.rig.dir)
        self.addCleanup(self.screen.close)
        self.daemon = self.rig.start()
        self.daemon.wait_identified()
        self.wrapper = self.start_wrapper()

    def start_wrapper(self, log_name: str = "wrapper.log") -> Wrapper:
        wrapper = Wrapper(self.screen, self.daemon.socket_path, self.wrapper_config, log_name)
        self.addCleanup(wrapper.stop, signal.SIGKILL)
        return wrapper

    def received(self, cid: int, uid: Optional[str] = None) -> List[Dict[str, Any]]:
        assert self.rig.sim is not None
        return [m for m in self.rig.sim.received([cid]) if uid is None or m.get("engagement_uid") == uid]

    def wait_received(self, cid: int, uid: Optional[str] = None, timeout: float = APPEAR) -> Dict[str, Any]:
        found = wait_until(lambda: self.received(cid, uid), timeout=timeout)
        if not found:
            self.fail(f"the simulator received no cid {cid} for {uid} within {timeout} s\n{self.wrapper.log()[-3000:]}{self.rig.diagnostics()}")
        return found[0]

    def press_ok(self) -> None:
        """The player presses Enter on the popup (its OK button has the focus)."""
        window = wait_until(lambda: self.screen.visible("^Smartico popup$"), timeout=APPEAR)
        self.assertIsNotNone(window, "no visible popup window")
        self.screen.xdotool("windowfocus", "--sync", window)
        self.screen.xdotool("key", "Return", check=True)

    def assert_display_loss_is_logged(self, server: subprocess.Popen, what: str) -> None:
        """With a popup on screen, the display server is killed: the wrapper says so and exits 1."""
        assert self.rig.sim is not None
        uid = self.rig.sim.emit_engagement()
        self.wait_received(103, uid)
        server.kill()
        server.wait(timeout=10)
        self.assertTrue(wait_until(lambda: self.wrapper.process.poll() is not None, timeout=20), "the wrapper outlived its display")
        self.assertEqual(self.wrapper.process.returncode, 1)
        self.assertIn(f"lost the display ({what})", self.wrapper.log())

    def press_close(self) -> None:
        """The player tabs from OK to Close and presses Enter (OK's link would open the widget).
        The short wait lets the page's focus settle in the window first."""
        window = wait_until(lambda: self.screen.visible("^Smartico popup$"), timeout=APPEAR)
        self.assertIsNotNone(window, "no visible popup window")
        self.screen.xdotool("windowfocus", "--sync", window)
        time.sleep(0.3)
        self.screen.xdotool("key", "Tab", "Return", check=True)

    def descendants(self, name: str) -> List[int]:
        """Processes under the wrapper whose command is `name` (WebKit's, inside bwrap)."""
        parents: Dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    parents[int(entry)] = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    pass

        def under(pid: int) -> bool:
            for _ in range(64):
                pid = parents.get(pid, 0)
                if pid == self.wrapper.process.pid:
                    return True
                if pid <= 1:
                    return False
            return False
        found = []
        for pid in parents:
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
                if command.rsplit("/", 1)[-1] == name and under(pid):
                    found.append(pid)
            except OSError:
                pass
        return found


class PopupTests(WrapperTestCase):
    def test_an_engagement_becomes_a_visible_popup_and_ok_closes_and_acks_it(self) -> None:
        assert self.rig.sim is not None
        uid = self.rig.sim.emit_engagement()
        self.wait_received(103, uid)  # the page's own impression, relayed with the bridge op
        window = wait_until(lambda: self.screen.visible("^Smartico popup$"), timeout=APPEAR)
        self.assertIsNotNone(window, f"no visible popup window\n{self.wrapper.log()}")
        shot = wait_until(lambda: (p := self.screen.screenshot("wrapper-popup.png")) and colours(p) > 50 and p, timeout=10)
        self.assertTrue(shot, "the screen shows no page (too few colours)")
        self.assertEqual(len(self.received(103, uid)), 1, "the impression must be reported once (by the page)")

        self.press_ok()
        self.wait_received(104, uid)  # the click, by the page
        self.wrapper.wait_log(r"popup seq \d+ closed for the deep link")
        self.assertTrue(wait_until(lambda: not self.screen.visible("^Smartico popup$"), timeout=10), "the popup stayed on screen")
        # The OK button's link (dp:gf_levels) comes back as a deeplink event and opens the widget.
        self.wrapper.wait_log(r'opening the widget for deep link "dp:gf_levels"')

        # Acknowledged: a new wrapper (same durable name) does not show it again.
        self.wrapper.stop()
        second = self.start_wrapper("wrapper2.log")
        time.sleep(3)
        self.assertNotIn(uid, second.log())
        self.assertEqual(len(self.received(103, uid)), 1)

    def test_a_popup_shown_when_the_wrapper_is_killed_is_shown_again_and_an_acked_one_never(self) -> None:
        assert self.rig.sim is not None
        first = self.rig.sim.emit_engagement()
        self.wait_received(103, first)
        self.press_ok()
        self.wait_received(104, first)
        second = self.rig.sim.emit_engagement()
        self.wait_received(103, second)
        self.wrapper.stop(signal.SIGKILL)

        again = self.start_wrapper("wrapper2.log")
        again.wait_log(f"showing engagement {second}")
        self.assertTrue(wait_until(lambda: len(self.received(103, second)) == 2, timeout=APPEAR), "not shown again after the restart")
        self.assertNotIn(first, again.log(), "an acknowledged popup was shown again")
        self.assertEqual(len(self.received(103, first)), 1)

    def test_fifty_engagements_are_shown_one_after_the_other_in_order(self) -> None:
        assert self.rig.sim is not None
        answer = self.rig.sim.control({"op": "emit", "kind": "engagement", "user": "alice", "count": 50, "bodies": False})
        uids = [d["engagement_uid"] for d in answer["deliveries"]]
        self.assertEqual(len(uids), 50)
        for i, uid in enumerate(uids):
            self.wait_received(103, uid)
            # One at a time: the next is not shown before this one is closed.
            if i + 1 < len(uids):
                self.assertEqual(self.received(103, uids[i + 1]), [], f"popup {i + 2} shown while {i + 1} was on screen")
            self.press_ok()
            self.wait_received(104, uid)
        shown = re.findall(r"showing engagement (\S+)", self.wrapper.log())
        self.assertEqual(shown, uids, "popups shown out of order or more than once")

    def test_a_popup_page_that_cannot_load_ends_in_a_106(self) -> None:
        assert self.rig.sim is not None
        # The wrapper is away; an engagement is journaled by the daemon; then the simulator, which
        # also serves the popup page, goes away: the page cannot load.
        self.wrapper.stop()
        uid = self.rig.sim.emit_engagement()
        self.assertTrue(wait_until(lambda: self.daemon.status()["journal"]["last_seq"] >= 1, timeout=10))
        port = self.rig.sim.ws_url.rsplit(":", 1)[1].split("/")[0]
        self.rig.sim.stop()
        self.rig.sim = None
        wrapper = self.start_wrapper("wrapper2.log")
        wrapper.wait_log(rf"engagement {uid} failed: .*reported to the server \(cid 106\)")
        self.assertFalse(self.screen.visible("^Smartico popup$"), "a popup that failed is on screen")
        # The server comes back on its port; the daemon sends the 106 from its outbox.
        control = os.path.join(self.rig.dir, "sim2.sock")
        sim = subprocess.Popen([os.environ.get("SMARTICO_SIM_BIN") or str(REPO / ".build/debug/smartico-sim"),
                                "--port", port, "--control", control],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(stop_process, sim, signal.SIGKILL)
        from support import line_request

        def failed() -> List[Dict[str, Any]]:
            try:
                answer = line_request(control, {"op": "received", "cid": [106]}, timeout=5)
            except OSError:
                return []
            return [e["message"] for e in answer.get("messages", []) if e.get("message", {}).get("engagement_uid") == uid]
        reports = wait_until(failed, timeout=APPEAR)
        self.assertTrue(reports, f"no 106 for {uid} at the simulator\n{wrapper.log()[-3000:]}{self.rig.diagnostics()}")
        self.assertEqual(reports[0]["activityType"], 30)


class FailureTests(WrapperTestCase):
    def test_a_web_process_that_dies_dismisses_its_popup_and_the_next_one_shows(self) -> None:
        assert self.rig.sim is not None
        first = self.rig.sim.emit_engagement()
        self.wait_received(103, first)
        pids = self.descendants("WebKitWebProcess")
        self.assertTrue(pids, "no WebKitWebProcess under the wrapper")
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        self.wrapper.wait_log(r"popup seq \d+ dismissed: its web process ended")
        self.assertTrue(wait_until(lambda: not self.screen.visible("^Smartico popup$"), timeout=10), "the dead popup stayed on screen")
        second = self.rig.sim.emit_engagement()
        self.wait_received(103, second)  # a new view, a new web process
        self.assertEqual(self.received(106, first), [], "a popup already shown was reported failed")
        self.assertEqual(self.wrapper.process.poll(), None)

    def test_a_daemon_restart_is_logged_and_popups_go_on(self) -> None:
        assert self.rig.sim is not None
        first = self.rig.sim.emit_engagement()
        self.wait_received(103, first)
        self.press_ok()
        self.wait_received(104, first)
        self.daemon.stop()
        self.wrapper.wait_log(r"lost smarticod \(.*\); reconnecting")
        self.daemon.start()
        self.daemon.wait_identified()
        self.wrapper.wait_log(r"connected to smarticod", count=2)
        second = self.rig.sim.emit_engagement()
        self.wait_received(103, second)
        self.assertEqual(len(self.received(103, first)), 1, "the acknowledged popup came back after the daemon's restart")

    def test_losing_the_display_is_logged_and_exits_1(self) -> None:
        assert self.rig.sim is not None
        self.assert_display_loss_is_logged(self.screen.xvfb, "the X server went away")


class ReleaseTests(WrapperTestCase):
    wrapper_config = {"release_after_s": 1}

    def test_after_a_release_webkit_is_gone_and_the_next_popup_shows(self) -> None:
        assert self.rig.sim is not None
        first = self.rig.sim.emit_engagement()
        self.wait_received(103, first)
        self.press_close()
        self.wrapper.wait_log(r"popup seq \d+ closed")
        self.wrapper.wait_log(r"releasing the web views")
        paged = self.wrapper.wait_log(r"released memory: (\d+) read-only file mappings paged out")
        self.assertGreater(int(paged[0]), 0, "nothing was paged out")
        # Paging out drops only pages of files the wrapper may write (root's libraries for root alone):
        # the pages of the libraries' code are unmapped as well, whoever runs it.
        unmapped = self.wrapper.wait_log(r"released memory: \d+ read-only file mappings paged out, (\d+) KiB of library pages unmapped")
        self.assertGreater(int(unmapped[0]), 0, "no library page was unmapped")
        self.assertTrue(wait_until(lambda: not self.descendants("WebKitWebProcess") and not self.descendants("WebKitNetworkProcess"),
                                   timeout=APPEAR), "WebKit's processes outlived the release")
        # What was paged out is read back: the next popup loads, reports itself and is drawn.
        second = self.rig.sim.emit_engagement()
        self.wait_received(103, second)
        self.assertTrue(wait_until(lambda: self.screen.visible("^Smartico popup$"), timeout=APPEAR), "no popup after the release")
        self.assertTrue(wait_until(lambda: colours(self.screen.screenshot("after-release.png")) > 50, timeout=10),
                        "the popup after the release shows no page")
        self.assertEqual(self.wrapper.process.poll(), None)


class LibraryPagesTests(WrapperTestCase):
    def test_a_popup_on_screen_unmaps_the_idle_library_pages_and_popups_still_draw(self) -> None:
        assert self.rig.sim is not None
        first = self.rig.sim.emit_engagement()
        self.wait_received(103, first)
        # A few seconds after it is shown: in the wrapper, and in the popup's web process through
        # the wrapper's web process extension (which the sandbox let it load).
        own = self.wrapper.wait_log(r"library pages unmapped: (\d+) KiB in this process")
        web = self.wrapper.wait_log(r"popup: library pages unmapped: (\d+) KiB in its web process")
        self.assertGreater(int(own[0]), 1024, "the wrapper unmapped almost nothing")
        self.assertGreater(int(web[0]), 1024, "the web process unmapped almost nothing")
        self.assertTrue(wait_until(lambda: colours(self.screen.screenshot("unmapped.png")) > 50, timeout=10),
                        "the popup shows no page after the unmapping")
        self.press_close()
        self.wrapper.wait_log(r"popup seq \d+ closed")
        # The next popup, in the same web process, reads back what it uses and is drawn.
        second = self.rig.sim.emit_engagement()
        self.wait_received(103, second)
        self.assertTrue(wait_until(lambda: colours(self.screen.screenshot("after-unmapping.png")) > 50, timeout=10),
                        "the next popup shows no page")
        # What nothing runs stays unmapped: where Mesa's driver brought LLVM in, its code is not
        # read back in the web process (only its relocated data, which was never unmapped, remains).
        for pid in self.descendants("WebKitWebProcess"):
            code = mapped_kib(pid, "libLLVM", "r-xp")
            if code is not None:
                self.assertLess(code, 1024, f"LLVM's code came back in the web process {pid}: {code} KiB")
        self.assertEqual(self.wrapper.process.poll(), None)


def mapped_kib(pid: int, name: str, perms: str) -> Optional[int]:
    """The resident KiB of a process's mappings of files whose name contains `name`, with
    permissions `perms`; None when it maps no such file."""
    total: Optional[int] = None
    current = False
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        fields = line.split()
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            current = len(fields) >= 6 and fields[1] == perms and name in fields[5]
            if current and total is None:
                total = 0
        elif current and fields[0] == "Rss:":
            total = (total or 0) + int(fields[1])
    return total


class WidgetTests(WrapperTestCase):
    def test_a_minigame_opens_the_widget_at_gf_saw_and_sends_711(self) -> None:
        assert self.rig.sim is not None
        message = self.rig.sim.emit("show_spin")
        template = message["saw_template_id"]
        self.wrapper.wait_log(r'widget: loading ".*dp=dp%3Agf_saw%26id%3D' + str(template) + r'%26standalone%3Dtrue.*force_mobile=true"')
        ack = wait_until(lambda: self.received(711), timeout=APPEAR)
        self.assertTrue(ack, "no 711 at the simulator")
        self.assertEqual(ack[0]["saw_template_id"], template)
        self.assertEqual(ack[0]["pending_message_id"], message["pending_message_id"])
        self.assertTrue(wait_until(lambda: self.screen.visible("^Smartico$"), timeout=APPEAR), "no visible widget window")

    def test_open_on_a_running_wrapper_opens_the_widget_there(self) -> None:
        second = subprocess.run([wrapper_binary(), "--open", "dp:gf_missions"], env=self.screen.env(),
                                capture_output=True, text=True, timeout=30)
        self.assertEqual(second.returncode, 0, second.stderr)
        self.wrapper.wait_log(r"opening the widget for --open dp:gf_missions")
        self.wrapper.wait_log(r'widget: loading ".*dp=dp%3Agf_missions.*"')
        self.assertTrue(wait_until(lambda: self.screen.visible("^Smartico$"), timeout=APPEAR), "no visible widget window")
        shot = wait_until(lambda: (p := self.screen.screenshot("wrapper-widget.png")) and colours(p) > 20 and p, timeout=10)
        self.assertTrue(shot, "the widget shows no page")
        self.assertEqual(self.wrapper.process.poll(), None, "the running wrapper exited")


class RelayBudgetTests(WrapperTestCase):
    def flood(self, pad: int, count: int) -> Tuple[int, int]:
        """A popup whose own script (an image's error handler runs in the top frame) posts `count`
        SEND_TO_SOCKET messages of `pad` bytes while the daemon is stopped; then the daemon goes on
        and the popup is closed. Returns (waiting, KiB) as the wrapper had them when it began to
        drop, after checking that every message was either relayed or counted as dropped."""
        assert self.rig.sim is not None
        uid = f"flooding-engagement-{pad}"
        script = (f"<img src=x onerror=\"setTimeout(function(){{var pad='x'.repeat({pad});for(var i=0;i<{count};i++){{"
                  "SmarticoBridge.postMessage(JSON.stringify({bcid:6,cid:9,eventType:'flood',payload:{i:i,pad:pad}}))}}, 3000)\">")
        self.rig.sim.control({"op": "emit", "user": "alice", "message": {
            "cid": 110, "engagement_uid": uid, "activityType": 30, "engagement_id": 2,
            "template_html": script, "params": {"title": "Flood"}}})
        # Stopped once the popup is on screen and its impression in, 3 s before its flood starts:
        # nothing of the flood is answered until the daemon goes on.
        self.wait_received(103, uid)
        os.kill(self.daemon.process.pid, signal.SIGSTOP)
        try:
            started = self.wrapper.wait_log(r"faster than smarticod takes them \((\d+) waiting, (\d+) KiB\)", timeout=APPEAR)
            time.sleep(2)
            self.rss_kb = int(re.search(r"VmRSS:\s+(\d+)", Path(f"/proc/{self.wrapper.process.pid}/status").read_text()).group(1))
        finally:
            os.kill(self.daemon.process.pid, signal.SIGCONT)
        self.wrapper.wait_log(r"(\d+) bridge messages were dropped while smarticod was behind")
        relayed = lambda: {m["payload"]["i"] for m in self.rig.sim.received([9]) if m.get("eventType") == "flood"}
        dropped = lambda: sum(int(n) for n in re.findall(r"(\d+) bridge messages were dropped", self.wrapper.log()))
        # Every message is accounted for: relayed once, or counted in a "dropped" line (WebKit may
        # still be handing the last ones over when the daemon goes on: those are relayed).
        self.assertTrue(wait_until(lambda: len(relayed()) + dropped() == count, timeout=APPEAR),
                        f"{len(relayed())} relayed + {dropped()} dropped != {count} posted")
        self.assertGreater(dropped(), count // 2, "far fewer dropped than posted beyond the bound")
        self.assertLessEqual(len(re.findall(r"bridge to smarticod failed|bridge messages", self.wrapper.log())), 6,
                             "not one warning per message: " + self.wrapper.log()[-3000:])
        # The flooding popup is closed and acknowledged (the acks got through), and the next one shows.
        self.press_close()
        self.wrapper.wait_log(r"popup seq \d+ closed")
        after = self.rig.sim.emit_engagement()
        self.wait_received(103, after)
        self.assertEqual(self.wrapper.process.poll(), None)
        return int(started[0][0]), int(started[0][1])

    def test_large_messages_stop_at_the_4_mib_budget(self) -> None:
        waiting, kib = self.flood(pad=20_000, count=2_000)  # 40 MB posted
        self.assertLessEqual(kib, 4096)
        self.assertGreater(kib, 4096 - 21)  # the next one would not have fitted
        self.assertLess(waiting, 256)
        self.assertLess(self.rss_kb, 600_000, f"the wrapper's RSS reached {self.rss_kb} kB")

    def test_small_messages_stop_at_256_waiting_and_leave_room_for_acks(self) -> None:
        waiting, kib = self.flood(pad=200, count=20_000)
        self.assertEqual(waiting, 256)
        self.assertLess(kib, 4096)


class MenuEntryTests(WrapperTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.wrapper.stop()  # this test starts its own, as the menu entry does

    def test_the_menu_entry_starts_a_wrapper_that_reads_the_users_configuration(self) -> None:
        assert self.rig.sim is not None
        exec_line = next(line[len("Exec="):] for line in (REPO / "packaging" / "smartico-wrapper.desktop").read_text().splitlines()
                         if line.startswith("Exec="))
        argv = exec_line.split()
        self.assertNotIn("--config", argv)
        self.assertNotIn("--socket", argv)
        # The user's file says where the daemon is: only a wrapper that read it can connect.
        user_config = Path(self.screen.env()["HOME"]) / ".config" / "smartico-wrapper" / "config.json"
        user_config.parent.mkdir(parents=True, exist_ok=True)
        user_config.write_text(json.dumps({"socket": self.daemon.socket_path, "durable": "menu-entry"}))
        log_path = Path(self.screen.dir) / "menu.log"
        with open(log_path, "ab") as log:
            started = subprocess.Popen([wrapper_binary(), *argv[1:], "--log-level", "debug"], env=self.screen.env(),
                                       stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        self.addCleanup(stop_process, started, signal.SIGKILL)
        self.assertTrue(wait_until(lambda: "connected to smarticod" in log_path.read_text(errors="replace"), timeout=APPEAR),
                        log_path.read_text(errors="replace"))
        text = log_path.read_text(errors="replace")
        self.assertIn(f'configuration "{user_config}"', text)
        self.assertIn('durable subscription "menu-entry"', text)
        # With none running, the entry's --open opened the widget in the wrapper it started.
        self.assertTrue(wait_until(lambda: "widget: on screen" in log_path.read_text(errors="replace"), timeout=APPEAR),
                        log_path.read_text(errors="replace")[-3000:])
        uid = self.rig.sim.emit_engagement()
        self.wait_received(103, uid)

    def test_an_invalid_users_configuration_is_refused_with_78_naming_the_file(self) -> None:
        user_config = Path(self.screen.env()["HOME"]) / ".config" / "smartico-wrapper" / "config.json"
        user_config.parent.mkdir(parents=True, exist_ok=True)
        user_config.write_text('{"kiosk": "yes"}')
        run = subprocess.run([wrapper_binary(), "--open"], env=self.screen.env(), capture_output=True, text=True, timeout=30)
        self.assertEqual(run.returncode, 78, run.stderr)
        self.assertIn(str(user_config), run.stderr)
        self.assertIn("kiosk", run.stderr)


class WaylandTests(WrapperTestCase):
    """The same wrapper with no X server: GTK and WebKit on a (headless) Weston."""
    screen_class = WaylandScreen

    def test_on_wayland_an_engagement_becomes_a_popup_on_screen(self) -> None:
        assert self.rig.sim is not None
        uid = self.rig.sim.emit_engagement()
        self.wait_received(103, uid)
        self.wrapper.wait_log(r"popup: on screen")
        shot = wait_until(lambda: (p := self.screen.screenshot("wrapper-popup-wayland.png")).exists() and colours(p) > 50 and p,
                          timeout=APPEAR)
        self.assertTrue(shot, f"the compositor's output shows no page\n{self.wrapper.log()[-3000:]}")
        self.assertNotIn("Gdk-WARNING **: cannot open display", self.wrapper.log())
        self.assertEqual(self.wrapper.process.poll(), None)

    def test_on_wayland_open_opens_the_widget_of_the_running_wrapper(self) -> None:
        second = subprocess.run([wrapper_binary(), "--open", "dp:gf_missions"], env=self.screen.env(),
                                capture_output=True, text=True, timeout=30)
        self.assertEqual(second.returncode, 0, second.stderr)
        self.wrapper.wait_log(r'widget: loading ".*dp=dp%3Agf_missions.*"')
        self.wrapper.wait_log(r"widget: on screen")
        self.assertEqual(self.wrapper.process.poll(), None, "the running wrapper exited")

    def test_losing_the_wayland_compositor_is_logged_and_exits_1(self) -> None:
        assert self.rig.sim is not None
        self.assert_display_loss_is_logged(self.screen.weston, "the Wayland compositor went away")


class KioskTests(WrapperTestCase):
    wrapper_config = {"kiosk": True}

    def test_in_kiosk_mode_the_widget_fills_the_screen_without_decorations(self) -> None:
        second = subprocess.run([wrapper_binary(), "--open", "dp:gf_store"], env=self.screen.env(),
                                capture_output=True, text=True, timeout=30)
        self.assertEqual(second.returncode, 0, second.stderr)
        window = wait_until(lambda: self.screen.visible("^Smartico$"), timeout=APPEAR)
        self.assertTrue(window, f"no visible widget window\n{self.wrapper.log()}")
        geometry = wait_until(lambda: "1280x800" in (g := self.screen.xdotool("getwindowgeometry", window)) and g, timeout=10)
        self.assertTrue(geometry, f"the kiosk widget does not fill the 1280x800 screen: {self.screen.xdotool('getwindowgeometry', window)}")
        self.screen.screenshot("wrapper-kiosk.png")
        self.assertIn("kiosk mode", self.wrapper.log())


class EvilFrame(http.server.BaseHTTPRequestHandler):
    """A page of another origin, framed by an engagement's template: it tries every way to post a
    bridge message, then tells this server it ran."""
    ran: List[str] = []

    def do_GET(self) -> None:  # noqa: N802
        if self.path.startswith("/ran"):
            EvilFrame.ran.append(self.path)
            self.send_response(204)
            self.end_headers()
            return
        body = b"""<!doctype html><script>
var m = JSON.stringify({bcid: 6, cid: 9, eventType: 'evil_frame', payload: {}});
var tried = [];
try { window.SmarticoBridge.postMessage(m); tried.push('own'); } catch (e) { tried.push('own:' + e.name); }
try { window.webkit.messageHandlers.smarticoBridge.postMessage(m); tried.push('handler'); } catch (e) { tried.push('handler:' + e.name); }
try { parent.SmarticoBridge.postMessage(m); tried.push('parent'); } catch (e) { tried.push('parent:' + e.name); }
try { top.document.dispatchEvent(new CustomEvent('smartico-wrapper-post', {detail: m})); tried.push('event'); } catch (e) { tried.push('event:' + e.name); }
try { top.postMessage(m, '*'); tried.push('postMessage'); } catch (e) { tried.push('postMessage:' + e.name); }
new Image().src = '/ran?' + encodeURIComponent(tried.join(','));
</script>evil"""
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


class IframeTests(WrapperTestCase):
    def setUp(self) -> None:
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), EvilFrame)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.addCleanup(self.server.server_close)
        self.addCleanup(self.server.shutdown)
        EvilFrame.ran = []
        # Allowed, so that the frame loads at all: what is tested is that its origin's messages are
        # refused because it is not the top frame.
        self.wrapper_config = {"allowed_origins": [f"http://127.0.0.1:{self.server.server_address[1]}"]}
        super().setUp()

    def test_a_bridge_message_from_an_iframe_of_another_origin_is_ignored(self) -> None:
        assert self.rig.sim is not None
        uid = "evil-frame-engagement"
        frame = f'<iframe src="http://127.0.0.1:{self.server.server_address[1]}/frame.html"></iframe>'
        self.rig.sim.control({"op": "emit", "user": "alice", "message": {
            "cid": 110, "engagement_uid": uid, "activityType": 30, "engagement_id": 1,
            "template_html": frame, "params": {"title": "Framed"}}})
        self.wait_received(103, uid)  # the top frame's own messages still work
        self.assertTrue(wait_until(lambda: EvilFrame.ran, timeout=APPEAR), "the frame never ran")
        time.sleep(2)
        events = [m for m in self.rig.sim.received([9]) if m.get("eventType") == "evil_frame"]
        self.assertEqual(events, [], f"a message from the frame reached the server (frame tried {EvilFrame.ran})")
        tried = urllib.parse.unquote(EvilFrame.ran[0])
        # No bridge in the frame, none reachable through its parent, and no way into the top
        # document's events: each attempt threw.
        for attempt in ("own:TypeError", "handler:TypeError", "parent:SecurityError", "event:SecurityError"):
            self.assertIn(attempt, tried)


if __name__ == "__main__":
    unittest.main()
