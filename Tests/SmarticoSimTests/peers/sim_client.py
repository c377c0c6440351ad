#!/usr/bin/env python3
"""An independent client of smartico-sim, for the end-to-end tests.

Written against the protocol documents only (002 and the notes), with the `websockets`
package, so it shares no code with the Swift side. Each scenario talks to a running
simulator and exits 0 when every check passed, 1 with one line per failed check otherwise.
Output: one JSON line per step on stdout ({"step":…, "ok":…, …}).

Usage:
  sim_client.py --url ws://127.0.0.1:PORT/websocket/services?master&domain=t&version=1.0.0 \
      [--control /path/sim.sock] [--salt S] SCENARIO

Scenarios:
  lifecycle   INIT→4, IDENTIFY→6, LOGIN→11, EVENT→10, 1003→2003, 500→501, 513→514, PING→PONG,
              an unknown cid → 99999, LOGOUT→12; checks fields, uuids and ts
  hash        (needs --salt) a valid hash is accepted; wrong and expired ones get errCode 100000
  pending     (needs --control) an engagement emitted to an offline user is delivered after
              IDENTIFY, again after a reconnect, and not after the client reported it (103)
  keepalive   answers server PINGs with PONGs (new uuid) for a few seconds; stays connected
  badinput    not-JSON → close 1007; empty session_id → errCode 4 and close 1008
  pushes      (needs --control) every push kind emitted to this client arrives with its cid and
              fields; a message given whole arrives as given; control clients/received see us
  faults      (needs --control) reject_init, reject_identify, delay, uuid_echo, half_open, clear,
              close, close_abruptly, malformed_json, malformed_frame, and an action armed on a cid
"""

import argparse
import asyncio
import hashlib
import json
import socket
import sys
import time
import uuid

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

FAILURES = []
SALT = None  # --salt: the simulator checks hashes, so IDENTIFY must carry a valid one


def step(name, ok, **details):
    print(json.dumps({"step": name, "ok": bool(ok), **details}), flush=True)
    if not ok:
        FAILURES.append(name)


def now_ms():
    return int(time.time() * 1000)


def stamp(message):
    message = dict(message)
    message.setdefault("ts", now_ms())
    message.setdefault("uuid", str(uuid.uuid4()))
    return message


def init_message(session_id=None):
    return stamp({
        "cid": 3, "label_key": "6816ba80-2967-4efb-a60c-694c72b03197", "brand_key": None,
        "device_id": "2632f21a-cb84-4ce0-95ca-bf71debfc9c9",
        "ua": {"fp": 95408084, "device_type": "DESKTOP", "tzoffset": -180, "os": "Linux"},
        "page": "https://sim.test/", "tracker_version": "1.0.0",
        "session_id": str(uuid.uuid4()) if session_id is None else session_id,
    })


def smartico_hash(user, salt, validity_ms):
    digest = hashlib.md5(f"{user}:{salt}:{validity_ms}".lower().encode()).hexdigest()
    return f"{digest}:{validity_ms}"


class Client:
    """A connection that answers server PINGs and lets a scenario wait for cids."""

    def __init__(self, ws):
        self.ws = ws
        self.inbox = []
        self.pings = 0

    async def send(self, message):
        message = stamp(message)
        await self.ws.send(json.dumps(message))
        return message

    async def recv(self, cid, timeout=5.0):
        deadline = time.monotonic() + timeout
        while True:
            for i, m in enumerate(self.inbox):
                if m.get("cid") == cid:
                    return self.inbox.pop(i)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no cid {cid} within {timeout}s; got {[m.get('cid') for m in self.inbox]}")
            raw = await asyncio.wait_for(self.ws.recv(), remaining)
            m = json.loads(raw)
            if m.get("cid") == 1:
                self.pings += 1
                await self.send({"cid": 2})
                if cid == 1:
                    return m
                continue
            self.inbox.append(m)

    async def request(self, message, answer_cid):
        sent = await self.send(message)
        return sent, await self.recv(answer_cid)


async def open_client(url):
    return Client(await connect(url, compression="deflate", open_timeout=10, ping_interval=None))


def control(path, request):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(path)
        s.sendall((json.dumps(request) + "\n").encode())
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return json.loads(data)


def valid_hash(user):
    """A hash the simulator accepts: valid for 10 minutes with --salt, none without."""
    return smartico_hash(user, SALT, now_ms() + 600_000) if SALT else None


def identify(user, hash_="valid"):
    return {"cid": 5, "ext_user_id": user, "hash": valid_hash(user) if hash_ == "valid" else hash_}


async def ready(url, user=None, hash_="valid"):
    c = await open_client(url)
    _, r = await c.request(init_message(), 4)
    if user is not None:
        _, r = await c.request(identify(user, hash_), 6)
    return c, r


async def lifecycle(args):
    c = await open_client(args.url)
    sent, r = await c.request(init_message(), 4)
    step("init", r.get("errCode") == 0 and 100 in r.get("products", []), uuid_echoed=r.get("uuid") == sent["uuid"])
    settings = r.get("settings", {})
    step("init.settings", "FCM_SENDER_ID" in settings and settings.get("DYNAMIC_IMAGE_DOMAIN", "").startswith("http"),
         settings=settings)
    step("init.payload", all(k in r.get("payload", {}) for k in ("country", "city", "ip", "s")))
    sent, r = await c.request(identify("py-user"), 6)
    step("identify", r.get("errCode") == 0 and r.get("public_username") == "py-user"
         and "user_ext_id=py-user" in r.get("native_app_gf_url", "") and "wrapper-popup" in r.get("native_app_popup_url", ""))
    step("identify.ts", isinstance(r.get("ts"), int) and abs(r["ts"] - now_ms()) < 60_000)
    for cid, answer, extra in [(7, 11, {"payload": {"ua_os": "Linux"}}),
                               (9, 10, {"eventType": "core_language_changed", "payload": {"language": "EN"}}),
                               (1003, 2003, {"token": "tok", "platform": 7, "pushNotificationUserStatus": 0}),
                               (500, 501, {}), (513, 514, {}), (4242, 99999, {})]:
        _, r = await c.request({"cid": cid, **extra}, answer)
        step(f"request.{cid}", r.get("cid") == answer, errCode=r.get("errCode"))
    sent = await c.send({"cid": 1})
    pong = await c.recv(2)
    step("client_ping", pong.get("uuid") != sent["uuid"])
    _, r = await c.request({"cid": 8}, 12)
    step("logout", r.get("errCode") == 0)
    await c.ws.close()


async def hash_scenario(args):
    if not args.salt:
        step("hash.salt_given", False)
        return
    valid = smartico_hash("HashUser", args.salt, now_ms() + 600_000)
    c, r = await ready(args.url, "HashUser", valid)
    step("hash.valid", r.get("errCode") == 0)
    await c.ws.close()
    for name, h in [("wrong", smartico_hash("Other", args.salt, now_ms() + 600_000)),
                    ("expired", smartico_hash("HashUser", args.salt, now_ms() - 1000)), ("missing", None)]:
        c, r = await ready(args.url, "HashUser", h)
        step(f"hash.{name}", r.get("errCode") == 100000, errMsg=r.get("errMsg"))
        await c.ws.close()


async def pending(args):
    if not args.control:
        step("pending.control_given", False)
        return
    user = f"py-{uuid.uuid4().hex[:8]}"
    r = control(args.control, {"op": "emit", "kind": "engagement", "user": user})
    queued = r.get("queued_pending") or [{}]
    uid = queued[0].get("engagement_uid")
    step("pending.queued", r.get("ok") and uid is not None)
    c, _ = await ready(args.url, user)
    e = await c.recv(110)
    step("pending.delivered", e.get("engagement_uid") == uid and e.get("activityType") == 30)
    await c.ws.close()
    c, _ = await ready(args.url, user)
    e = await c.recv(110)
    step("pending.redelivered", e.get("engagement_uid") == uid)
    await c.send({"cid": 103, "engagement_uid": uid, "activityType": 30})
    await asyncio.sleep(0.2)
    await c.ws.close()
    step("pending.cleared", control(args.control, {"op": "pending", "user": user}).get("engagements") == [])
    c, _ = await ready(args.url, user)
    try:
        await c.recv(110, timeout=0.5)
        step("pending.not_resent", False)
    except TimeoutError:
        step("pending.not_resent", True)
    await c.ws.close()


async def keepalive(args):
    c, _ = await ready(args.url, "py-keepalive")
    deadline = time.monotonic() + args.seconds
    try:
        while time.monotonic() < deadline:
            try:
                await c.recv(-1, timeout=deadline - time.monotonic())
            except TimeoutError:
                break
        step("keepalive.connected", True, pings=c.pings)
    except ConnectionClosed as e:
        step("keepalive.connected", False, close=str(e))
    await c.ws.close()


async def badinput(args):
    c = await open_client(args.url)
    await c.ws.send("this is not json")
    try:
        await c.ws.recv()
        step("badinput.not_json", False)
    except ConnectionClosed as e:
        step("badinput.not_json", e.rcvd is not None and e.rcvd.code == 1007, code=e.rcvd.code if e.rcvd else None)
    c = await open_client(args.url)
    await c.send(init_message(session_id=""))
    r = json.loads(await c.ws.recv())
    step("badinput.empty_session_id", r.get("cid") == 4 and r.get("errCode") == 4)
    try:
        await c.ws.recv()
        step("badinput.empty_session_id.closed", False)
    except ConnectionClosed as e:
        step("badinput.empty_session_id.closed", e.rcvd is not None and e.rcvd.code == 1008)


def my_client_id(args):
    """The newest connection's id (scenarios run one at a time against a simulator)."""
    clients = control(args.control, {"op": "clients"}).get("clients", [])
    return clients[-1]["id"] if clients else None


PUSH_KINDS = [("engagement", 110, ("engagement_uid", "template_html", "activityType")),
              ("deeplink", 105, ("engagement_uid", "payload")),
              ("props", 108, ("props",)),
              ("reload_achievements", 504, ()),
              ("spins_count", 706, ("saw_template_id", "spin_count")),
              ("show_spin", 707, ("saw_template_id", "pending_message_id", "saw_game_type_id")),
              ("prize_drop_win", 708, ("saw_template_id", "pending_message_id")),
              ("jp_win", 808, ("jp_template_id", "winning_amount"))]


async def pushes(args):
    if not args.control:
        step("pushes.control_given", False)
        return
    user = f"py-push-{uuid.uuid4().hex[:6]}"
    c, _ = await ready(args.url, user)
    me = my_client_id(args)
    listed = control(args.control, {"op": "clients"}).get("clients", [])
    step("control.clients", any(x.get("id") == me and x.get("user") == user and x.get("state") == "ready" for x in listed))
    for kind, cid, fields in PUSH_KINDS:
        r = control(args.control, {"op": "emit", "kind": kind, "client": me})
        m = await c.recv(cid)
        step(f"push.{kind}", r.get("ok") and r.get("sent") == 1 and all(f in m for f in fields)
             and isinstance(m.get("ts"), int) and isinstance(m.get("uuid"), str), got=sorted(m))
    r = control(args.control, {"op": "emit", "message": {"cid": 108, "props": {"ach_points_balance": 5}}, "client": me})
    m = await c.recv(108)
    step("push.message", r.get("ok") and m.get("props") == {"ach_points_balance": 5} and "uuid" in m)
    await c.send({"cid": 9, "eventType": "py_marker", "payload": {}})
    await c.recv(10)
    got = control(args.control, {"op": "received", "client": me, "cid": 9}).get("messages", [])
    step("control.received", any(e.get("message", {}).get("eventType") == "py_marker" and e.get("user") == user for e in got))
    bad = control(args.control, {"op": "emit", "kind": "nope"})
    step("control.error", bad.get("ok") is False and "nope" in bad.get("error", ""), error=bad.get("error"))
    await c.ws.close()


async def expect_close(c, timeout=5.0):
    """Reads until the connection ends; returns (close frame received or None, close frame we sent or None)."""
    try:
        while True:
            await asyncio.wait_for(c.ws.recv(), timeout)
    except ConnectionClosed as e:
        return e.rcvd, e.sent


async def faults(args):
    if not args.control:
        step("faults.control_given", False)
        return
    ctl = lambda **r: control(args.control, {"op": "fault", **r})

    c = await open_client(args.url)
    me = my_client_id(args)
    r = ctl(kind="reject_init", errCode=7, errMsg="maintenance", client=me)
    _, a = await c.request(init_message(), 4)
    step("fault.reject_init", r.get("ok") and a.get("errCode") == 7 and a.get("errMsg") == "maintenance")
    ctl(kind="clear", client=me)
    _, a = await c.request(init_message(), 4)
    step("fault.clear", a.get("errCode") == 0)
    r = ctl(kind="reject_identify", client=me)
    _, a = await c.request(identify("py-faults"), 6)
    step("fault.reject_identify", a.get("errCode") == 100000)
    ctl(kind="clear", client=me)
    _, a = await c.request(identify("py-faults"), 6)
    step("fault.reject_identify.cleared", a.get("errCode") == 0)

    ctl(kind="delay", ms=600, client=me)
    t0 = time.monotonic()
    sent, a = await c.request({"cid": 9, "eventType": "x", "payload": {}}, 10)
    waited = time.monotonic() - t0
    step("fault.delay", a.get("uuid") == sent["uuid"] and waited >= 0.5, waited=round(waited, 3))
    ctl(kind="delay", ms=0, client=me)

    ctl(kind="uuid_echo", enabled=False, client=me)
    sent, a = await c.request({"cid": 9, "eventType": "x", "payload": {}}, 10)
    step("fault.uuid_echo", a.get("uuid") != sent["uuid"])
    ctl(kind="clear", client=me)

    ctl(kind="half_open", client=me)
    await c.send({"cid": 1})
    try:
        await c.recv(2, timeout=0.8)
        step("fault.half_open", False)
    except TimeoutError:
        step("fault.half_open", True)
    ctl(kind="clear", client=me)
    await c.send({"cid": 1})
    await c.recv(2)
    step("fault.half_open.cleared", True)

    r = ctl(kind="malformed_json", client=me)
    raw = await asyncio.wait_for(c.ws.recv(), 5)
    try:
        json.loads(raw)
        step("fault.malformed_json", False)
    except ValueError:
        step("fault.malformed_json", r.get("ok") and r.get("applied_to") == [me])

    r = ctl(kind="close", code=4000, reason="bye", client=me)
    rcvd, _ = await expect_close(c)
    step("fault.close", rcvd is not None and rcvd.code == 4000 and rcvd.reason == "bye")

    c, _ = await ready(args.url)
    ctl(kind="close_abruptly", client=my_client_id(args))
    rcvd, _ = await expect_close(c)
    step("fault.close_abruptly", rcvd is None)

    c, _ = await ready(args.url)
    ctl(kind="malformed_frame", client=my_client_id(args))
    # The server writes the raw bytes 83 00 (a final frame with the reserved opcode 0x3): websockets
    # itself must fail the connection with 1002 ("invalid opcode"), so the Close 1002 is ours and
    # comes first; the server only answers it.
    closed = None
    try:
        while True:
            await asyncio.wait_for(c.ws.recv(), 5)
    except ConnectionClosed as e:
        closed = e
    sent = closed.sent if closed else None
    rcvd = closed.rcvd if closed else None
    step("fault.malformed_frame",
         sent is not None and sent.code == 1002 and "opcode" in sent.reason
         and (rcvd is None or closed.rcvd_then_sent is False),
         sent=str(sent), rcvd=str(rcvd), order=str(closed))

    c, _ = await ready(args.url)
    r = ctl(kind="close_abruptly", on_cid=5, client=my_client_id(args))
    await c.send({"cid": 9, "eventType": "x", "payload": {}})
    await c.recv(10)
    await c.send(identify("py-armed"))
    rcvd, _ = await expect_close(c)
    step("fault.armed_on_cid", r.get("armed_on_cid") == 5 and rcvd is None)


SCENARIOS = {"pushes": pushes, "faults": faults, "lifecycle": lifecycle, "hash": hash_scenario, "pending": pending, "keepalive": keepalive,
             "badinput": badinput}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument("--control")
    p.add_argument("--salt")
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("scenario", choices=sorted(SCENARIOS))
    args = p.parse_args()
    global SALT
    SALT = args.salt
    try:
        asyncio.run(asyncio.wait_for(SCENARIOS[args.scenario](args), 60))
    except Exception as e:  # a scenario that cannot finish is a failure with its reason
        step(f"{args.scenario}.error", False, error=f"{type(e).__name__}: {e}")
    if FAILURES:
        print("failed: " + ", ".join(FAILURES), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
