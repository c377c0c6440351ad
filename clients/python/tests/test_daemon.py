"""The client against the real smarticod and smartico-sim (subprocesses)."""

from __future__ import annotations

import errno
import os
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))

from support import Rig, wait_until  # noqa: E402

import smarticod  # noqa: E402
from smarticod import (BadRequest, Client, DaemonUnavailable, NotPermitted, ServerError,  # noqa: E402
                       SmarticoError, UnknownOp)

TIMEOUT = 20.0


class DaemonTestCase(unittest.TestCase):
    def setUp(self) -> None:
        self.rig = Rig()
        self.addCleanup(self.rig.close)
        self.sim = self.rig.sim
        self.daemon = self.rig.daemon

    def client(self, **options) -> Client:
        client = Client(self.daemon.socket_path, timeout=TIMEOUT, **options)
        self.addCleanup(client.close)
        return client

    def next_event(self, subscription, name: str = None, timeout: float = TIMEOUT, rig: Rig = None):
        """The next event (named ``name`` when given, others skipped), failing after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            event = subscription.get(timeout=max(remaining, 0)) if remaining > 0 else None
            if event is None:
                self.fail(f"no {name or 'event'} within {timeout} s{(rig or self.rig).diagnostics()}")
            if name is None or event.name == name:
                return event

    def assert_quiet(self, subscription, name: str, seconds: float = 1.0) -> None:
        """No ``name`` event arrives within ``seconds`` (a duplicate would)."""
        deadline = time.monotonic() + seconds
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            event = subscription.get(timeout=remaining)
            if event is not None and event.name == name:
                self.fail(f"unexpected {event}{self.rig.diagnostics()}")

    def received_reports(self, uid: str):
        return [m for m in self.sim.received([103, 104, 106]) if m.get("engagement_uid") == uid]


class OpsTests(DaemonTestCase):
    def test_hello_and_status(self) -> None:
        self.rig.start()
        self.daemon.wait_identified()
        with self.client() as client:
            hello = client.hello()
            self.assertEqual(hello["api"], 1)
            status = client.status()
            self.assertEqual(status["user"]["ext_user_id"], "alice")
            self.assertTrue(status["user"]["identified"])

    def test_identify_then_receive_engagements(self) -> None:
        self.rig.start(user=None, hash=None)
        client = self.client()
        subscription = client.subscribe(types=["engagement", "identified"], follow=False)
        identified = client.identify("alice", hash="h")
        self.assertEqual(identified["ext_user_id"], "alice")
        self.assertEqual(self.next_event(subscription, "identified").data["ext_user_id"], "alice")
        uids = [self.sim.emit_engagement("alice") for _ in range(3)]
        events = [self.next_event(subscription, "engagement") for _ in uids]
        self.assertEqual([e.engagement_uid for e in events], uids)
        self.assertEqual([e.activity_type for e in events], [30, 30, 30])
        seqs = [e.seq for e in events]
        self.assertEqual(seqs, sorted(set(seqs)))
        self.assertTrue(all(e.journaled and e.ts > 0 for e in events))
        self.assertEqual(events[0].data["message"]["cid"], 110)

    def test_report_and_ack_round_trip(self) -> None:
        self.rig.start()
        self.daemon.wait_identified()
        client = self.client()
        subscription = client.subscribe(types=["engagement"], durable="roundtrip", auto_ack=False)
        uid = self.sim.emit_engagement("alice")
        event = self.next_event(subscription, "engagement")
        self.assertEqual(event.engagement_uid, uid)
        self.assertTrue(client.report("impression", event)["uuid"])
        client.report("action", event, action="dp:gf_missions")
        reported = wait_until(lambda: len(self.received_reports(uid)) >= 2 and self.received_reports(uid), TIMEOUT)
        self.assertTrue(reported, f"the simulator did not receive the reports{self.rig.diagnostics()}")
        self.assertEqual([m["cid"] for m in reported], [103, 104])
        self.assertEqual(reported[0].get("activityType"), 30)
        self.assertEqual(subscription.ack(event), event.seq)
        # The engagement is no longer pending at the server.
        self.assertEqual(self.sim.control({"op": "pending", "user": "alice"})["engagements"], [])
        # The cursor is stored: a new connection on the name starts after it.
        subscription.close()
        with self.client() as other:
            again = other.subscribe(types=["engagement"], durable="roundtrip", follow=False)
            self.assert_quiet(again, "engagement", 0.5)

    def test_failed_report_reaches_the_server(self) -> None:
        self.rig.start()
        self.daemon.wait_identified()
        client = self.client()
        uid = self.sim.emit_engagement("alice")
        client.report("failed", uid, activity_type=31)
        reported = wait_until(lambda: self.received_reports(uid), TIMEOUT)
        self.assertTrue(reported, self.rig.diagnostics())
        self.assertEqual(reported[0]["cid"], 106)
        self.assertEqual(reported[0].get("activityType"), 31)


    def test_request_and_other_control_ops(self) -> None:
        self.rig.start()
        self.daemon.wait_identified()
        client = self.client()
        answer = client.request({"cid": 500}, timeout_ms=10000)
        self.assertEqual(answer["cid"], 501)
        self.assertTrue(answer["levels"])
        self.assertEqual(client.log_level("debug"), {"level": "debug", "previous": "info"})
        self.assertTrue(client.language("pt-br")["uuid"])
        self.assertTrue(client.event("client_test", {"n": 1})["uuid"])

        def arrived():
            return [m for m in self.sim.received([9]) if m.get("eventType") == "client_test"]
        event = wait_until(arrived, TIMEOUT)
        self.assertTrue(event, self.rig.diagnostics())
        self.assertEqual(event[0]["payload"], {"n": 1})

    def test_since_replays_the_journal(self) -> None:
        self.rig.start()
        self.daemon.wait_identified()
        uids = [self.sim.emit_engagement("alice") for _ in range(3)]
        self.assertTrue(wait_until(lambda: self.daemon.status()["journal"]["last_seq"] >= 3, TIMEOUT))
        client = self.client()
        with self.assertRaises(ValueError):
            client.subscribe(types=["engagements"])
        subscription = client.subscribe(types=["engagement"], since=0, follow=False)
        got = [self.next_event(subscription, "engagement") for _ in uids]
        self.assertEqual([e.engagement_uid for e in got], uids)


class ErrorTests(DaemonTestCase):
    def test_bad_request_and_unknown_op(self) -> None:
        self.rig.start()
        client = self.client()
        with self.assertRaises(BadRequest) as caught:
            client.report("shown", "uid-1")
        self.assertEqual(caught.exception.code, "bad_request")
        self.assertIn('"kind"', caught.exception.message)
        with self.assertRaises(BadRequest) as caught:
            client.call("hello", colour="blue")
        self.assertIn('"colour"', caught.exception.message)
        with self.assertRaises(UnknownOp):
            client.call("frobnicate")
        # The connection goes on after refusals.
        self.assertEqual(client.hello()["api"], 1)

    def test_api_op_surfaces_the_daemons_answer(self) -> None:
        self.rig.start()
        self.daemon.wait_identified()
        client = self.client()
        # A call by name answers the SDK's public shape, derived fields included.
        missions = client.api("missions.list")
        self.assertIsInstance(missions, list)
        self.assertTrue(missions, "the simulator has missions")
        self.assertTrue(all("availability_status" in m and m["type"] == "mission" for m in missions), missions[:1])
        # raw: the server's message unchanged.
        raw = client.api("levels.list", raw=True)
        self.assertEqual(raw["cid"], 501)
        # Arguments are checked, and an unknown call is refused by name.
        with self.assertRaises(BadRequest) as caught:
            client.api("inbox.list", limit=5)
        self.assertIn("args.limit", caught.exception.message)
        with self.assertRaises(BadRequest) as caught:
            client.api("no.such.call")
        self.assertIn("no.such.call", caught.exception.message)

    def test_server_error_carries_errcode(self) -> None:
        self.rig.start(user=None, hash=None)
        self.sim.control({"op": "fault", "kind": "reject_identify", "errCode": 100000, "errMsg": "hash is not valid"})
        client = self.client()
        with self.assertRaises(ServerError) as caught:
            client.identify("mallory", hash="wrong")
        self.assertEqual(caught.exception.err_code, 100000)
        self.assertEqual(caught.exception.err_msg, "hash is not valid")

    def test_read_only_peer_gets_not_permitted(self) -> None:
        self.rig.start(socket_options={"mode": "0666"})
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: uid/gid 65534 (nobody), no supplementary groups
            code = 1
            try:
                os.close(read_fd)
                os.setgroups([])
                os.setresgid(65534, 65534, 65534)
                os.setresuid(65534, 65534, 65534)
                with Client(self.daemon.socket_path, timeout=10) as client:
                    client.hello()  # the read role may
                    try:
                        client.identify("alice", hash="h")
                        message = "identify succeeded"
                    except NotPermitted as error:
                        message = f"not_permitted {error.message}"
                        code = 0
            except BaseException as error:  # noqa: BLE001 - reported to the parent
                message = f"{type(error).__name__}: {error}"
            os.write(write_fd, message.encode()[:4000])
            os._exit(code)
        os.close(write_fd)
        deadline = time.monotonic() + TIMEOUT
        status = None
        while time.monotonic() < deadline:
            waited, status = os.waitpid(pid, os.WNOHANG)
            if waited:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            self.fail("the non-root child did not finish within the timeout")
        message = os.read(read_fd, 4000).decode()
        os.close(read_fd)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0, message)
        self.assertIn('op "identify" needs the control role', message)
        self.assertIn("uid 65534", message)

    def test_daemon_unavailable(self) -> None:
        with self.assertRaises(DaemonUnavailable) as caught:
            Client(os.path.join(self.rig.dir, "none.sock"), timeout=5)
        self.assertEqual(caught.exception.errno, errno.ENOENT)
        self.assertIn("none.sock", str(caught.exception))
        self.assertIsInstance(caught.exception, SmarticoError)

        self.rig.start()
        client = self.client()
        subscription = client.subscribe(follow=False)
        self.daemon.stop()
        with self.assertRaises(DaemonUnavailable):
            while subscription.get(timeout=TIMEOUT) is not None:
                pass
            self.fail("no DaemonUnavailable within the timeout")
        with self.assertRaises(DaemonUnavailable) as caught:
            client.hello()  # connects again: nothing listens
        self.assertIn(caught.exception.errno, (errno.ENOENT, errno.ECONNREFUSED))

        following = Client(self.daemon.socket_path, timeout=5, connect=False)
        self.addCleanup(following.close)
        started = time.monotonic()
        with self.assertRaises(DaemonUnavailable):
            subscription = following.subscribe(follow=True, give_up_after=1.0)
            subscription.get(timeout=TIMEOUT)
        self.assertLess(time.monotonic() - started, 10)


class ResumeTests(DaemonTestCase):
    def test_durable_resume_after_the_client_disconnects(self) -> None:
        self.rig.start()
        self.daemon.wait_identified()
        first = self.client()
        subscription = first.subscribe(types=["engagement"], durable="kiosk", auto_ack=False, follow=False)
        uids = [self.sim.emit_engagement("alice") for _ in range(2)]
        e1 = self.next_event(subscription, "engagement")
        subscription.ack(e1)
        e2 = self.next_event(subscription, "engagement")  # handed out, never acknowledged
        self.assertEqual([e1.engagement_uid, e2.engagement_uid], uids)
        first.close()

        uids += [self.sim.emit_engagement("alice") for _ in range(2)]
        second = self.client()
        resumed = second.subscribe(types=["engagement"], durable="kiosk", follow=False)
        got = [self.next_event(resumed, "engagement") for _ in range(3)]
        # At least once: e2 again (not acknowledged); never e1; nothing lost.
        self.assertEqual([e.engagement_uid for e in got], uids[1:])
        self.assertEqual(got[0].seq, e2.seq)
        self.assert_quiet(resumed, "engagement", 0.5)
        resumed.close()  # leaving normally acknowledges the last one handed out (auto_ack)

        third = self.client()
        after = third.subscribe(types=["engagement"], durable="kiosk", follow=False)
        self.assert_quiet(after, "engagement", 0.5)

    def test_auto_ack_acknowledges_only_what_the_app_asked_past(self) -> None:
        self.rig.start()
        self.daemon.wait_identified()
        client = self.client()
        subscription = client.subscribe(types=["engagement"], durable="auto", follow=False)
        uids = [self.sim.emit_engagement("alice") for _ in range(3)]
        try:
            with subscription:
                self.next_event(subscription, "engagement")
                self.next_event(subscription, "engagement")  # the first is processed now
                self.next_event(subscription, "engagement")  # the second is processed now
                raise RuntimeError("the app crashed while showing the third")
        except RuntimeError:
            pass
        client.close()
        again = self.client().subscribe(types=["engagement"], durable="auto", follow=False)
        # The app crashed before it was done with the third: it comes again.
        self.assertEqual(self.next_event(again, "engagement").engagement_uid, uids[2])
        self.assert_quiet(again, "engagement", 0.5)

    def test_an_event_processed_while_its_replay_arrived_is_not_handed_out_again(self) -> None:
        """Found by scripts/soak.py: the daemon restarts while the app handles an event; the app's
        report reconnects (the op connects again, which resumes the durable subscription from its
        cursor and so replays the event the app holds); the app finishes and asks for the next
        one, which makes the held event processed (auto_ack). It must not come again."""
        self.rig.start()
        self.daemon.wait_identified()
        client = self.client()
        subscription = client.subscribe(types=["engagement"], durable="held", follow=True)  # auto_ack
        uids = [self.sim.emit_engagement("alice")]
        held = self.next_event(subscription, "engagement")
        self.assertEqual(held.engagement_uid, uids[0])

        self.assertEqual(self.daemon.stop(), 0)
        self.daemon.start()
        reported = None
        for _ in range(100):  # bounded: the first attempt finds the old connection gone
            try:
                reported = client.report("impression", held)
                break
            except smarticod.DaemonUnavailable:
                time.sleep(0.05)
        self.assertIsNotNone(reported)
        self.assertEqual(subscription.reconnects, 1)  # the report's connection resumed the subscription

        uids.append(self.sim.emit_engagement("alice"))
        after = self.next_event(subscription, "engagement")
        self.assertEqual(after.engagement_uid, uids[1])  # not the held one a second time
        self.assertGreater(after.seq, held.seq)
        self.assert_quiet(subscription, "engagement", 0.5)

    def test_follow_across_a_daemon_restart(self) -> None:
        self.rig.start()
        self.daemon.wait_identified()
        client = self.client()
        subscription = client.subscribe(types=["engagement"], follow=True)
        uids = [self.sim.emit_engagement("alice")]
        first = self.next_event(subscription, "engagement")
        self.assertEqual(first.engagement_uid, uids[0])

        self.assertEqual(self.daemon.stop(), 0)
        self.assertIsNone(subscription.get(timeout=0.7))  # the daemon is away: no event, no error
        uids += [self.sim.emit_engagement("alice") for _ in range(2)]  # pending at the server
        self.daemon.start()
        uids.append(self.sim.emit_engagement("alice"))
        got = [first] + [self.next_event(subscription, "engagement") for _ in range(3)]
        self.assertEqual([e.engagement_uid for e in got], uids)
        seqs = [e.seq for e in got]
        self.assertEqual(seqs, sorted(set(seqs)))
        self.assert_quiet(subscription, "engagement", 1.0)
        self.assertGreaterEqual(subscription.reconnects, 1)

    def test_durable_follow_across_a_daemon_restart_is_exactly_once(self) -> None:
        self.rig.start()
        self.daemon.wait_identified()
        client = self.client()
        subscription = client.subscribe(types=["engagement"], durable="follow", follow=True)
        uids = [self.sim.emit_engagement("alice") for _ in range(2)]
        got = [self.next_event(subscription, "engagement") for _ in range(2)]
        # The second is handed out but not processed (not acknowledged) when the daemon goes away.
        self.daemon.stop(signal.SIGKILL)
        uids.append(self.sim.emit_engagement("alice"))
        self.daemon.start()
        got.append(self.next_event(subscription, "engagement"))
        self.assertEqual([e.engagement_uid for e in got], uids)
        self.assert_quiet(subscription, "engagement", 1.0)
        subscription.close()
        # Everything processed is acknowledged: a new subscriber on the name gets nothing old.
        again = self.client().subscribe(types=["engagement"], durable="follow", follow=False)
        self.assert_quiet(again, "engagement", 0.5)

    def test_unacknowledged_event_comes_again_after_a_daemon_restart(self) -> None:
        self.rig.start()
        self.daemon.wait_identified()
        client = self.client()
        subscription = client.subscribe(types=["engagement"], durable="explicit", auto_ack=False, follow=True)
        uids = [self.sim.emit_engagement("alice") for _ in range(2)]
        e1 = self.next_event(subscription, "engagement")
        self.assertEqual(subscription.ack(e1), e1.seq)
        e2 = self.next_event(subscription, "engagement")
        self.assertEqual([e1.engagement_uid, e2.engagement_uid], uids)
        # The daemon goes away while the app handles e2: its report fails, e2 is not acknowledged.
        self.assertEqual(self.daemon.stop(), 0)
        with self.assertRaises(DaemonUnavailable):
            client.report("impression", e2)
        uids.append(self.sim.emit_engagement("alice"))
        self.daemon.start()
        again = self.next_event(subscription, "engagement")
        self.assertEqual((again.seq, again.engagement_uid), (e2.seq, e2.engagement_uid))
        client.report("impression", again)
        subscription.ack(again)
        e3 = self.next_event(subscription, "engagement")
        self.assertEqual(e3.engagement_uid, uids[2])
        self.assert_quiet(subscription, "engagement", 1.0)

    def test_follow_across_a_fresh_store_hands_out_the_new_events(self) -> None:
        """The daemon restarts on a fresh store (its database was damaged and moved aside), so
        its seqs begin again at 1: new events are handed out, not taken for replays. The new
        journal grows past the old seqs before the client resumes (the race CI once lost: a
        resume from the old position inside the new journal skipped the events before it)."""
        for durable in ("fresh", None):
            with self.subTest(durable=durable):
                rig = Rig()
                self.addCleanup(rig.close)
                rig.start()
                rig.daemon.wait_identified()
                client = Client(rig.daemon.socket_path, timeout=TIMEOUT)
                self.addCleanup(client.close)
                subscription = client.subscribe(types=["engagement"], durable=durable, follow=True)
                before = [rig.sim.emit_engagement("alice") for _ in range(4)]
                got = [self.next_event(subscription, "engagement") for _ in range(4)]
                self.assertEqual([e.engagement_uid for e in got], before)
                for e in got:  # reported: the server does not send them again after the restart
                    client.report("impression", e)
                wait_until(lambda: len(rig.sim.received([103])) >= 4, TIMEOUT)
                self.assertEqual(rig.daemon.stop(), 0)
                with open(os.path.join(rig.daemon.state_dir, "smarticod.db"), "r+b") as db:
                    db.write(b"not a database, " * 64)
                rig.daemon.start()
                after = [rig.sim.emit_engagement("alice") for _ in range(6)]
                # store_damaged and the six: seq 7, beyond everything the subscription saw.
                self.assertTrue(wait_until(lambda: rig.daemon.status()["journal"]["last_seq"] >= 7, TIMEOUT),
                                rig.diagnostics())
                events = [self.next_event(subscription, "engagement", rig=rig) for _ in range(6)]
                self.assertEqual([e.engagement_uid for e in events], after, rig.diagnostics())
                self.assertLess(events[0].seq, got[-1].seq)  # the fresh journal's seqs
                self.assert_quiet(subscription, "engagement", 0.5)
                self.assertTrue(any(name.startswith("smarticod.db.corrupt-")
                                    for name in os.listdir(rig.daemon.state_dir)))
                subscription.close()

    def test_gap_is_surfaced(self) -> None:
        self.rig.start(journal={"retention_events": 2})
        self.daemon.wait_identified()
        client = self.client()
        subscription = client.subscribe(types=["engagement"], durable="slow", follow=False)
        self.sim.emit_engagement("alice")
        seen = self.next_event(subscription, "engagement")
        subscription.ack(seen)
        client.close()
        uids = [self.sim.emit_engagement("alice") for _ in range(5)]

        def journaled() -> bool:
            return self.daemon.status()["journal"]["last_seq"] >= seen.seq + 5
        self.assertTrue(wait_until(journaled, TIMEOUT), self.rig.diagnostics())
        resumed = self.client().subscribe(types=["engagement"], durable="slow", follow=False)
        gap = self.next_event(resumed)
        self.assertEqual(gap.name, "gap", gap)
        self.assertEqual(gap.data["missed"], 3)
        rest = [self.next_event(resumed, "engagement") for _ in range(2)]
        self.assertEqual([e.engagement_uid for e in rest], uids[3:])


if __name__ == "__main__":
    unittest.main()
