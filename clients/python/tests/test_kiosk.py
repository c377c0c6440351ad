"""examples/kiosk.py against the real smarticod and smartico-sim: the engagement lifecycle."""

from __future__ import annotations

import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))

from support import Rig, wait_until  # noqa: E402

import smarticod  # noqa: E402

KIOSK = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "kiosk.py")
TIMEOUT = 20.0


class KioskTests(unittest.TestCase):
    def setUp(self) -> None:
        self.rig = Rig()
        self.addCleanup(self.rig.close)
        self.sim = self.rig.sim
        self.rig.start()
        self.rig.daemon.wait_identified()
        # The first start makes the durable name; it starts at the journal's end, as a kiosk
        # installed on a running device does.
        self.kiosk("--idle-exit", "0.5")

    def kiosk(self, *arguments: str) -> subprocess.CompletedProcess:
        # The subprocess imports the same smarticod as this test (installed, or the tree's).
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(smarticod.__file__)))
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": package_root}
        run = subprocess.run([sys.executable, KIOSK, "--socket", self.rig.daemon.socket_path] + list(arguments),
                             env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        self.assertEqual(run.returncode, 0, f"kiosk {arguments}: {run.stdout}\n{run.stderr}{self.rig.diagnostics()}")
        return run

    def reports(self, uid: str, count: int):
        def got():
            found = [m for m in self.sim.received([103, 104, 106]) if m.get("engagement_uid") == uid]
            return found if len(found) >= count else None
        found = wait_until(got, TIMEOUT)
        self.assertIsNotNone(found, f"the simulator did not get {count} reports of {uid}{self.rig.diagnostics()}")
        return found

    def test_shown_then_tapped_reports_impression_then_action_then_acknowledges(self) -> None:
        engagement = self.sim.emit("engagement", "alice")
        uid = engagement["engagement_uid"]
        run = self.kiosk("--tap", "--count", "1", "--idle-exit", str(TIMEOUT))
        self.assertIn(f"showing engagement {uid}", run.stdout)
        self.assertIn(f"tapped {uid}", run.stdout)
        reports = self.reports(uid, 2)
        self.assertEqual([m["cid"] for m in reports], [103, 104])
        self.assertEqual(reports[1].get("action"), engagement["params"]["button_dp"])
        # Acknowledged: the next start shows nothing old.
        again = self.kiosk("--idle-exit", "1")
        self.assertNotIn(uid, again.stdout)

    def test_a_display_failure_reports_failed(self) -> None:
        uid = self.sim.emit_engagement("alice")
        run = self.kiosk("--fail-display", "--count", "1", "--idle-exit", str(TIMEOUT))
        self.assertIn(f"cannot show {uid}", run.stdout)
        self.assertEqual([m["cid"] for m in self.reports(uid, 1)], [106])

    def test_minigame_is_acknowledged_and_deeplink_opened(self) -> None:
        spin = self.sim.emit("show_spin", "alice")
        self.sim.emit("deeplink", "alice")
        run = self.kiosk("--count", "2", "--idle-exit", str(TIMEOUT))
        self.assertIn("opening mini-game 5", run.stdout)
        self.assertIn("opening dp:gf_missions", run.stdout)

        def acked():
            return [m for m in self.sim.received([711]) if m.get("pending_message_id") == spin["pending_message_id"]]
        found = wait_until(acked, TIMEOUT)
        self.assertTrue(found, f"no 711 for {spin}{self.rig.diagnostics()}")
        self.assertEqual(found[0]["saw_template_id"], 5)


if __name__ == "__main__":
    unittest.main()
