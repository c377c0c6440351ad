#!/usr/bin/env python3
"""A kiosk app: shows what Smartico sends, the way docs/socket-api.md asks an app to.

It subscribes durably (name ``kiosk``) to engagements, mini-games and deep links, so nothing is
missed across its own restarts or the daemon's, and for each event:

- ``engagement``: shows it natively (as text, from ``message.params``: no Smartico page), so it
  reports it itself: ``report impression``, and on a tap ``report action``; when it cannot be
  shown, ``report failed``. Without the reports every engagement stays pending at the server.
  An app that shows Smartico's page (``data.popup_url``) does not report impressions or taps:
  the page reports them itself through the bridge, and the app relays its messages with the
  ``bridge`` op (``smartico-wrapper`` does that; docs/socket-api.md, "What an app must do").
  Doing both would count every engagement twice.
- ``minigame``: opens the mini-game's URL, then ``minigame_ack`` (the server's 707 is handled).
- ``deeplink``: opens the link (``url`` for the gamification links, the app's own handler for
  ``custom`` ones; ``dummy`` links need nothing).

and then acknowledges it (``ack``): only after it was handled, so a crash in between shows it
again at the next start (at least once).

"Showing" is printing here, and the user's tap is simulated: ``--tap`` taps every engagement,
``--fail-display`` makes every display fail. Run it as a user with the control role (root, the
daemon's user, or one listed in socket.control_uids / socket.control_gids): reports are control
ops.

    python3 examples/kiosk.py --tap
    python3 examples/kiosk.py --socket /tmp/d.sock --count 3
"""

from __future__ import annotations

import argparse
import sys
import time

from smarticod import Client, DaemonUnavailable, Event, SmarticoError


class DisplayError(Exception):
    """The screen could not show it (a broken template, no display)."""


def show(event: Event, fail: bool) -> None:
    message = event.data.get("message") or {}
    params = message.get("params") or {}
    if fail:
        raise DisplayError("the display is not available (--fail-display)")
    print(f"[seq {event.seq}] showing engagement {event.engagement_uid}: {params.get('title') or '(no title)'}", flush=True)


def handle_engagement(client: Client, event: Event, tap: bool, fail: bool) -> None:
    if event.engagement_uid is None:
        print(f"[seq {event.seq}] an engagement without engagement_uid; nothing to report", flush=True)
        return
    try:
        show(event, fail)
    except DisplayError as error:
        print(f"[seq {event.seq}] cannot show {event.engagement_uid}: {error}; reporting failed", flush=True)
        client.report("failed", event)
        return
    client.report("impression", event)
    if tap:  # the user tapped its button
        message = event.data.get("message") or {}
        action = (message.get("params") or {}).get("button_dp")
        print(f"[seq {event.seq}] tapped {event.engagement_uid} ({action})", flush=True)
        client.report("action", event, action=action if isinstance(action, str) else None)


def handle_minigame(client: Client, event: Event) -> None:
    template = event.data.get("saw_template_id")
    if template is None:
        print(f"[seq {event.seq}] a mini-game that cannot be opened: {event.data.get('problem')}", flush=True)
        return
    print(f"[seq {event.seq}] opening mini-game {template}: {event.data.get('url')}", flush=True)
    pending = (event.data.get("message") or {}).get("pending_message_id")
    client.minigame_ack(template, pending if isinstance(pending, int) else None)


def handle_deeplink(event: Event) -> None:
    kind = event.data.get("kind")
    if kind == "gamification":
        print(f"[seq {event.seq}] opening {event.data.get('dp')}: {event.data.get('url')}", flush=True)
    elif kind == "custom":
        print(f"[seq {event.seq}] handling the app's own link {event.data.get('dp')}", flush=True)
    else:
        print(f"[seq {event.seq}] {event.data.get('dp')}: nothing to do", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description="Show Smartico engagements, mini-games and deep links.")
    parser.add_argument("--socket", help="the daemon's socket (default $SMARTICOD_SOCKET or /run/smarticod/smarticod.sock)")
    parser.add_argument("--name", default="kiosk", help="the durable subscription's name (default kiosk)")
    parser.add_argument("--tap", action="store_true", help="simulate the user tapping every engagement")
    parser.add_argument("--fail-display", action="store_true", help="simulate a display that fails")
    parser.add_argument("--count", type=int, help="exit after handling this many events")
    parser.add_argument("--idle-exit", type=float, help="exit after this many seconds without an event")
    options = parser.parse_args()

    handled = 0
    try:
        with Client(options.socket, connect=False) as client:
            subscription = client.subscribe(types=["engagement", "minigame", "deeplink"],
                                            durable=options.name, auto_ack=False)
            print(f"kiosk: following {client.path} as {options.name!r}", file=sys.stderr, flush=True)
            while options.count is None or handled < options.count:
                event = subscription.get(timeout=options.idle_exit)
                if event is None:
                    break
                try:
                    if event.name == "gap":
                        print(f"kiosk: {event.data.get('missed')} events were dropped from the journal "
                              f"before this kiosk read them", file=sys.stderr, flush=True)
                    elif event.name == "engagement":
                        handle_engagement(client, event, options.tap, options.fail_display)
                    elif event.name == "minigame":
                        handle_minigame(client, event)
                    elif event.name == "deeplink":
                        handle_deeplink(event)
                except DaemonUnavailable as error:
                    # Not acknowledged: the subscription reconnects and hands it out again.
                    print(f"kiosk: {error}; seq {event.seq} comes again once the daemon is back",
                          file=sys.stderr, flush=True)
                    continue
                subscription.ack(event)  # handled: do not deliver it again
                handled += 1
    except KeyboardInterrupt:
        return 130
    except DaemonUnavailable as error:
        print(f"kiosk: {error}", file=sys.stderr)
        return 69
    except SmarticoError as error:
        print(f"kiosk: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
