"""The connection to smarticod's socket, its ops, and subscriptions."""

from __future__ import annotations

import collections
import errno as errno_codes
import json
import os
import socket
import time
from typing import Any, Deque, Dict, Iterable, Iterator, List, Optional, Union

from .errors import (ClientTimeout, DaemonUnavailable, ProtocolError, SmarticoError,
                     error_from_answer)
from .events import EVENT_NAMES, JOURNALED_EVENTS, Event

#: What :meth:`Client._read_object` returns for an event it queued.
_EVENT: Dict[str, Any] = {}

#: Where the daemon listens unless ``socket.path`` says otherwise.
DEFAULT_SOCKET = "/run/smarticod/smarticod.sock"


def default_socket_path() -> str:
    """``$SMARTICOD_SOCKET`` when set, else :data:`DEFAULT_SOCKET`."""
    return os.environ.get("SMARTICOD_SOCKET") or DEFAULT_SOCKET


def _describe_connect_error(path: str, error: OSError) -> str:
    code = error.errno
    if code == errno_codes.ENOENT:
        return (f"cannot connect to smarticod at {path}: no such socket; is the daemon running "
                f"(systemctl status smarticod) and is socket.path (or $SMARTICOD_SOCKET) this path?")
    if code == errno_codes.ECONNREFUSED:
        return f"cannot connect to smarticod at {path}: nobody listens (the daemon stopped or restarts)"
    if code == errno_codes.EACCES:
        return (f"cannot connect to smarticod at {path}: permission denied; the socket's mode and "
                f"group (socket.mode, socket.group) must let uid {os.geteuid()} in")
    return f"cannot connect to smarticod at {path}: {error.strerror or error}"


class Client:
    """One connection to the daemon. Not thread-safe: use it from one thread.

    ``path``: the socket (default :func:`default_socket_path`). ``timeout``: seconds to wait for
    an answer (a ``request`` op waits at least its ``timeout_ms`` plus 5 s). With
    ``connect=False`` the connection is opened by the first op.

    Every op sends one request and waits for its answer; events that arrive meanwhile are kept
    for the subscription. A failed op raises the :class:`~smarticod.SmarticoError` subclass of
    the daemon's error code; a lost connection raises :class:`~smarticod.DaemonUnavailable`, and
    the next op connects again.
    """

    def __init__(self, path: Optional[str] = None, timeout: float = 60.0, connect: bool = True) -> None:
        self.path = path or default_socket_path()
        self.timeout = timeout
        self._sock: Optional[socket.socket] = None
        self._buffer = bytearray()
        self._events: Deque[Dict[str, Any]] = collections.deque()
        self._next_id = 1
        # Requests sent without waiting (acks of a subscription): id → (op, report an error?).
        self._unanswered: Dict[int, Any] = {}
        self._deferred_error: Optional[SmarticoError] = None
        self._confirmed_cursor = -1
        self._max_seq_received = -1
        self._subscription: Optional[Subscription] = None
        if connect:
            self.connect()

    # -- connection -------------------------------------------------------------------------

    def connect(self) -> None:
        """Opens the connection if it is not open (and resumes an active subscription on it)."""
        if self._sock is not None:
            return
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.path)
        except OSError as error:
            sock.close()
            raise DaemonUnavailable(_describe_connect_error(self.path, error), self.path, error.errno) from None
        self._sock = sock
        self._buffer.clear()
        self._unanswered.clear()
        subscription = self._subscription
        if subscription is not None and subscription._resumable():
            try:
                subscription._subscribe()
            except SmarticoError:
                # Never leave a connection without the subscription the app expects on it.
                self._drop()
                raise

    @property
    def connected(self) -> bool:
        return self._sock is not None

    def close(self) -> None:
        """Closes the connection (a durable subscription keeps its cursor in the daemon)."""
        if self._subscription is not None:
            self._subscription._closed = True
            self._subscription = None
        self._drop()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _drop(self, lost: Optional[DaemonUnavailable] = None) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
        self._sock = None
        self._buffer.clear()
        self._unanswered.clear()
        if lost is not None and self._subscription is not None and not self._subscription.follow:
            self._subscription._lost = lost

    def _lost(self, what: str, error: Optional[OSError] = None) -> DaemonUnavailable:
        detail = f": {error.strerror or error}" if error is not None else ""
        lost = DaemonUnavailable(f"the connection to smarticod at {self.path} was lost {what}{detail} "
                                 f"(the daemon stopped or restarts)", self.path,
                                 error.errno if error is not None else None)
        self._drop(lost)
        return lost

    def _send(self, request: Dict[str, Any]) -> None:
        if self._sock is None:
            self.connect()
        assert self._sock is not None
        line = json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
        try:
            self._sock.settimeout(self.timeout)
            self._sock.sendall(line)
        except socket.timeout:
            raise ClientTimeout(f"the daemon at {self.path} did not take the request within "
                                f"{self.timeout} s", op=request.get("op")) from None
        except OSError as error:
            raise self._lost(f"while sending {request.get('op')}", error) from None

    def _read_line(self, deadline: Optional[float]) -> Optional[bytes]:
        """The next line, or None when ``deadline`` (a ``time.monotonic()``) passes."""
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0:
                line = bytes(self._buffer[:newline])
                del self._buffer[:newline + 1]
                return line
            if self._sock is None:
                raise self._lost("before the answer")
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return None
            try:
                self._sock.settimeout(remaining)
                chunk = self._sock.recv(65536)
            except socket.timeout:
                return None
            except OSError as error:
                raise self._lost("while reading", error) from None
            if not chunk:
                raise self._lost("(the daemon closed it)")
            self._buffer += chunk

    def _read_object(self, deadline: Optional[float], until_event: bool = False) -> Optional[Dict[str, Any]]:
        """The next answer, or None at ``deadline``. Events are queued (with ``until_event`` the
        first one returns :data:`_EVENT`); answers to requests sent without waiting are checked
        here."""
        while True:
            line = self._read_line(deadline)
            if line is None:
                return None
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except ValueError as error:
                raise ProtocolError(f"the daemon at {self.path} sent a line that is not JSON ({error}): "
                                    f"{line[:200]!r}") from None
            if not isinstance(value, dict):
                raise ProtocolError(f"the daemon at {self.path} sent a line that is not a JSON object: {line[:200]!r}")
            if "event" in value:
                seq = value.get("seq")
                if isinstance(seq, int):
                    self._max_seq_received = max(self._max_seq_received, seq)
                if value.get("event") == "gap":
                    first = (value.get("data") or {}).get("first_available_seq")
                    if isinstance(first, int):
                        self._max_seq_received = max(self._max_seq_received, first - 1)
                self._events.append(value)
                if until_event:
                    return _EVENT
                continue
            pending = self._unanswered.pop(value.get("id"), None) if isinstance(value.get("id"), int) else None
            if pending is not None:
                op, report = pending
                if value.get("ok") is True:
                    if op == "ack":
                        cursor = (value.get("result") or {}).get("cursor")
                        if isinstance(cursor, int):
                            self._confirmed_cursor = max(self._confirmed_cursor, cursor)
                elif report and self._deferred_error is None:
                    self._deferred_error = error_from_answer(value, op)
                continue
            return value

    # -- requests ---------------------------------------------------------------------------

    def call(self, op: str, _timeout: Optional[float] = None, **args: Any) -> Any:
        """Sends ``{"op": op, …args}`` (arguments that are None are left out) and returns the
        answer's ``result``; raises the typed error of a refusal."""
        request: Dict[str, Any] = {"id": self._next_id, "op": op}
        self._next_id += 1
        for key, value in args.items():
            if value is not None:
                request[key] = value
        self._send(request)
        wait = self.timeout if _timeout is None else max(self.timeout, _timeout)
        deadline = time.monotonic() + wait
        while True:
            answer = self._read_object(deadline)
            if answer is None:
                # Its answer may still come: ignore it then.
                self._unanswered[request["id"]] = (op, False)
                raise ClientTimeout(f"no answer to {op} from the daemon at {self.path} within {wait:g} s", op=op)
            answer_id = answer.get("id")
            if answer_id == request["id"]:
                if answer.get("ok") is True:
                    return answer.get("result")
                raise error_from_answer(answer, op)
            if answer_id is None and answer.get("ok") is False:
                # A refusal of the connection (too_many_connections) or of a line (line_too_long).
                raise error_from_answer(answer, op)

    def _send_without_waiting(self, op: str, **args: Any) -> None:
        request_id = self._next_id
        self._next_id += 1
        self._unanswered[request_id] = (op, True)
        self._send({"id": request_id, "op": op, **args})

    # -- ops (docs/socket-api.md, "Ops") -----------------------------------------------------

    def hello(self) -> Dict[str, Any]:
        """``{"api": 1, "version": …, "state": …}``."""
        return self.call("hello")

    def status(self) -> Dict[str, Any]:
        """The status object (state, user, outbox, journal, last_error, …)."""
        return self.call("status")

    def identify(self, ext_user_id: str, hash: Optional[str] = None) -> Dict[str, Any]:
        """Identifies the user (control role); the ``identified`` data. Raises
        :class:`~smarticod.ServerError` when the server refuses the user or hash."""
        return self.call("identify", ext_user_id=ext_user_id, hash=hash)

    def logout(self) -> Dict[str, Any]:
        return self.call("logout")

    def login(self) -> Dict[str, Any]:
        return self.call("login")

    def language(self, language: str) -> Dict[str, Any]:
        return self.call("language", language=language)

    def push_token(self, token: str, status: int, platform: Optional[int] = None,
                   app_package_id: Optional[str] = None) -> Dict[str, Any]:
        return self.call("push_token", token=token, status=status, platform=platform,
                         app_package_id=app_package_id)

    def event(self, event_type: str, payload: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        return self.call("event", event_type=event_type, payload=payload)

    def report(self, kind: str, engagement_uid: Union[str, Event], action: Optional[str] = None,
               activity_type: Optional[int] = None) -> Dict[str, Any]:
        """Reports an engagement: ``kind`` is ``"impression"`` (shown), ``"action"`` (tapped;
        ``action`` names what) or ``"failed"`` (could not be shown). ``engagement_uid`` may be
        the :class:`~smarticod.Event` itself: its uid and ``activityType`` are used."""
        if isinstance(engagement_uid, Event):
            event = engagement_uid
            uid = event.engagement_uid
            if uid is None:
                raise ValueError(f"a {event.name} event (seq {event.seq}) without an engagement_uid cannot be reported")
            if activity_type is None:
                activity_type = event.activity_type
            engagement_uid = uid
        return self.call("report", kind=kind, engagement_uid=engagement_uid, action=action,
                         activity_type=activity_type)

    def ack(self, seq: int) -> int:
        """Moves this connection's durable cursor to ``seq``; the cursor after the call."""
        result = self.call("ack", seq=seq)
        cursor = result.get("cursor") if isinstance(result, dict) else None
        if isinstance(cursor, int):
            self._confirmed_cursor = max(self._confirmed_cursor, cursor)
            return cursor
        return seq

    def forget(self, durable: str) -> Dict[str, Any]:
        """Deletes a durable subscription's name and cursor."""
        return self.call("forget", durable=durable)

    def minigame_ack(self, saw_template_id: int, pending_message_id: Optional[int] = None) -> Dict[str, Any]:
        return self.call("minigame_ack", saw_template_id=saw_template_id, pending_message_id=pending_message_id)

    def push_report(self, kind: str, engagement_uid: str, message_id: Optional[str] = None, action: Optional[str] = None,
                    user_ext_id: Optional[str] = None) -> Dict[str, Any]:
        """Queues a push report for Smartico's public HTTP API: ``{"queued": true, "uuid", "waiting_for_user"}``."""
        return self.call("push_report", kind=kind, engagement_uid=engagement_uid, message_id=message_id,
                         action=action, user_ext_id=user_ext_id)

    def send(self, message: Dict[str, Any]) -> Dict[str, Any]:
        return self.call("send", message=message)

    def request(self, message: Dict[str, Any], expect_cid: Optional[int] = None,
                timeout_ms: Optional[int] = None) -> Dict[str, Any]:
        """Sends ``message`` to the server and returns its answer (the ``message`` of the result)."""
        wait = (timeout_ms if timeout_ms is not None else 30000) / 1000 + 5
        result = self.call("request", _timeout=wait, message=message, expect_cid=expect_cid,
                           timeout_ms=timeout_ms)
        return result.get("message") if isinstance(result, dict) else result

    def bridge(self, message: Dict[str, Any]) -> Dict[str, Any]:
        return self.call("bridge", message=message)

    def log_level(self, level: str) -> Dict[str, Any]:
        """``{"level", "previous"}``: the daemon logs at ``level`` until its next restart or reload."""
        return self.call("log_level", level=level)

    def api(self, call: str, args: Optional[Dict[str, Any]] = None, /, *, raw: bool = False,
            **kwargs: Any) -> Any:
        """Smartico's data API by name (issue 28), e.g. ``api("missions.list")``: sends
        ``{"op": "api", "call": call, "args": {…}}`` (``args`` merged with keyword arguments;
        ``"raw": true`` with ``raw=True``). A daemon without the op raises
        :class:`~smarticod.UnknownOp`."""
        merged = dict(args or {})
        merged.update(kwargs)
        return self.call("api", call=call, args=merged, raw=True if raw else None)

    def unsubscribe(self) -> None:
        """Ends this connection's subscription (see :meth:`Subscription.close`)."""
        if self._subscription is not None:
            self._subscription.close()
        else:
            self.call("unsubscribe")

    # -- events -----------------------------------------------------------------------------

    def subscribe(self, types: Optional[Iterable[str]] = None, durable: Optional[str] = None,
                  since: Optional[int] = None, follow: bool = True, auto_ack: bool = True,
                  max_retry_delay: float = 2.0, give_up_after: Optional[float] = None) -> "Subscription":
        """Subscribes this connection; iterate the result for :class:`~smarticod.Event`\\ s.

        - ``types``: event names (default all); ``gap`` always comes.
        - ``since``: replay the journaled events after this seq first.
        - ``durable``: a name whose cursor lives in the daemon: the subscription starts after
          what the name acknowledged, and survives restarts of the app and of the daemon.
        - ``follow``: when the daemon goes away, reconnect (0.1 s doubling to
          ``max_retry_delay``; raise :class:`~smarticod.DaemonUnavailable` after
          ``give_up_after`` seconds away, None: never) and resume where the app is. Without
          ``durable``: after the last seq received (``since``), so events come in order, once
          each, without a gap. With ``durable``: from the name's cursor; what the app has
          processed is not handed out again, the event it holds unfinished (not acknowledged)
          and everything after it is (at least once, never lost).
        - ``auto_ack`` (durable only): an event counts as processed when the app asks for the
          next one, or leaves the ``with`` block of the subscription without an exception;
          processed events are acknowledged before the client waits for more. With
          ``auto_ack=False`` call :meth:`Subscription.ack` after handling an event.

        One subscription per client (per connection).
        """
        if self._subscription is not None:
            raise ValueError("this client already has a subscription; close it first or use another Client")
        type_list = None
        if types is not None:
            type_list = list(types)
            unknown = [t for t in type_list if t not in EVENT_NAMES]
            if unknown:
                raise ValueError(f"unknown event types {unknown}; known: {', '.join(sorted(EVENT_NAMES))}")
        subscription = Subscription(self, type_list, durable, since, follow, auto_ack,
                                    max_retry_delay, give_up_after)
        self._subscription = subscription
        self._events.clear()
        self._max_seq_received = -1
        self._confirmed_cursor = -1
        try:
            if self._sock is None:
                self.connect()  # subscribes
            else:
                subscription._subscribe()
        except DaemonUnavailable as error:
            if not follow or error.errno == errno_codes.EACCES:
                self._subscription = None
                raise
            # get() connects again.
        except BaseException:
            self._subscription = None
            raise
        return subscription


class Subscription:
    """The events of a :meth:`Client.subscribe`: iterate it, or call :meth:`get` with a timeout.

    ``last_seq``: the highest seq received. ``reconnects``: how often it resumed after the
    daemon went away.
    """

    def __init__(self, client: Client, types: Optional[List[str]], durable: Optional[str],
                 since: Optional[int], follow: bool, auto_ack: bool, max_retry_delay: float,
                 give_up_after: Optional[float]) -> None:
        self._client = client
        self.types = types
        self.durable = durable
        self.follow = follow
        self.auto_ack = auto_ack
        self.max_retry_delay = max_retry_delay
        self.give_up_after = give_up_after
        self.reconnects = 0
        #: ``last_seq`` of the latest subscribe answer.
        self.daemon_last_seq: Optional[int] = None
        self._since = since
        # The daemon's journal the seqs below are positions in (the subscribe answer's `journal`).
        self._journal: Optional[str] = None
        # Where the subscription started in the daemon's journal (its first answer's last_seq,
        # or `since`): the least a durable name's cursor can be.
        self._start_seq = -1
        self._subscribed = False
        self._delivered = -1     # highest journaled seq handed out
        self._processed = -1     # highest seq the app is done with
        self._acked = -1         # highest seq an ack was sent for on this connection
        self._current: Optional[Event] = None
        self._closed = False
        self._lost: Optional[DaemonUnavailable] = None
        self._away_since: Optional[float] = None
        self._delay = 0.1

    @property
    def last_seq(self) -> int:
        return max(self._client._max_seq_received, self._since if self._since is not None else -1)

    def _resumable(self) -> bool:
        return not self._closed and self._lost is None and (self.follow or not self._subscribed)

    def _subscribe(self) -> None:
        """Subscribes on the client's current connection, resuming where the app is."""
        client = self._client
        args: Dict[str, Any] = {}
        if self.types is not None:
            args["types"] = self.types
        if self.durable is not None:
            args["durable"] = self.durable
            if not self._subscribed and self._since is not None:
                args["since"] = self._since
            elif self._subscribed:
                # The daemon keeps the name's cursor and ignores this; it counts only when the
                # name is gone (a fresh store after a damaged one): beyond the new journal's end,
                # the replay starts at its beginning, so nothing journaled since is skipped.
                floor = max(self._acked, client._confirmed_cursor, self._start_seq)
                if floor >= 0:
                    args["since"] = floor
        else:
            since = self._since
            if self._subscribed:
                since = self.last_seq
            if since is not None and since >= 0:
                args["since"] = since
        was_resume = self._subscribed
        if was_resume and self._journal is not None and "since" in args:
            # Names the journal `since` counts in: if the daemon's store was replaced (a damaged one
            # moved aside), its seqs began again at 1 and it replays its journal from the start.
            args["journal"] = self._journal
        if was_resume and self.durable is not None:
            # The replay from the cursor brings back every journaled event after it: the ones
            # received and not handed out yet, and the one the app holds and has not finished
            # (not acknowledged; with auto_ack, it has not asked for the next one). That one is
            # handed out again only if it is still not processed when the app asks for the next
            # (_take): an app that finished it meanwhile does not get it twice.
            kept = [e for e in client._events if e.get("event") not in JOURNALED_EVENTS]
            client._events.clear()
            client._events.extend(kept)
            self._delivered = self._processed
        result = client.call("subscribe", **args)
        last = result.get("last_seq") if isinstance(result, dict) else None
        self.daemon_last_seq = last if isinstance(last, int) else None
        journal = result.get("journal") if isinstance(result, dict) else None
        journal = journal if isinstance(journal, str) else None
        if journal is not None and self._journal is not None:
            replaced = journal != self._journal
        else:  # a daemon that does not name its journal: a last seq below what was seen
            replaced = isinstance(last, int) and last < max(self._delivered, client._max_seq_received)
        self._journal = journal
        if not was_resume and isinstance(last, int):
            self._start_seq = self._since if self._since is not None else last
        if self.durable is None and self._since is None and isinstance(last, int):
            self._since = last
        if was_resume:
            self.reconnects += 1
        self._subscribed = True
        # Acks sent on the old connection and not confirmed are sent again.
        self._acked = client._confirmed_cursor
        if was_resume and replaced:
            # The daemon's journal is not the one this subscription saw: it started a fresh store (a
            # damaged one was moved aside) and its seqs begin again at 1. Nothing counted from the
            # old journal applies; without this, every new event would look replayed.
            self._delivered = self._processed = self._acked = self._start_seq = -1
            client._max_seq_received = -1
            client._confirmed_cursor = -1
            if self.durable is None:
                self._since = 0
        self._away_since = None
        self._delay = 0.1

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        event = self.get(None)
        assert event is not None
        return event

    def __enter__(self) -> "Subscription":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None and self.auto_ack and self._current is not None:
            self._processed = max(self._processed, self._current.seq)
        self.close()

    def get(self, timeout: Optional[float] = None) -> Optional[Event]:
        """The next event, or None when ``timeout`` seconds pass without one (None: wait).

        Raises the typed error of a refused subscribe or ack, and
        :class:`~smarticod.DaemonUnavailable` when the daemon is away (without ``follow``, or
        after ``give_up_after``)."""
        if self._closed:
            raise ValueError("this subscription is closed")
        if self.auto_ack and self._current is not None:
            self._processed = max(self._processed, self._current.seq)
        self._current = None
        client = self._client
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if client._deferred_error is not None:
                error, client._deferred_error = client._deferred_error, None
                raise error
            event = self._take()
            if event is not None:
                self._current = event
                return event
            if self._lost is not None:
                raise self._lost
            try:
                if client._sock is None:
                    client.connect()  # subscribes again
                # Acknowledge what is processed once the lines that arrived together are handed out.
                if (self.durable is not None and self._processed > self._acked
                        and b"\n" not in client._buffer):
                    client._send_without_waiting("ack", seq=self._processed)
                    self._acked = self._processed
                if client._read_object(deadline, until_event=True) is None:
                    return None  # the deadline passed
                # An event was queued, or an answer nobody waits for came (ignored).
            except DaemonUnavailable as error:
                if not self.follow or error.errno == errno_codes.EACCES:
                    raise
                now = time.monotonic()
                if self._away_since is None:
                    self._away_since = now
                if self.give_up_after is not None and now - self._away_since > self.give_up_after:
                    raise
                pause = self._delay
                if deadline is not None:
                    if deadline - now <= 0:
                        return None
                    pause = min(pause, deadline - now)
                time.sleep(pause)
                self._delay = min(self._delay * 2, self.max_retry_delay)

    def _take(self) -> Optional[Event]:
        events = self._client._events
        while events:
            event = Event.from_line(events.popleft())
            if event.journaled:
                if event.seq <= max(self._delivered, self._processed):
                    # Replayed from the durable cursor after a reconnect: already handed out, or
                    # already processed (the event the app held when the replay came, finished since:
                    # with auto_ack, by asking for this next one).
                    continue
                self._delivered = event.seq
            return event
        return None

    def ack(self, event: Union[Event, int, None] = None) -> Optional[int]:
        """Acknowledges ``event`` (an :class:`Event` or a seq; default the last one handed out)
        and everything before it: the durable cursor moves there. Returns the cursor, or None
        when the daemon is away and ``follow`` is on (the ack is sent after the reconnect)."""
        if self.durable is None:
            raise ValueError("ack needs a durable subscription (subscribe(durable=NAME))")
        if event is None:
            if self._current is None:
                raise ValueError("no event to acknowledge yet")
            event = self._current
        seq = event.seq if isinstance(event, Event) else int(event)
        self._processed = max(self._processed, seq)
        try:
            cursor = self._client.ack(seq)
        except DaemonUnavailable:
            if not self.follow:
                raise
            return None
        self._acked = max(self._acked, cursor)
        return cursor

    def close(self) -> None:
        """Acknowledges what was processed (durable) and unsubscribes; the client stays open."""
        if self._closed:
            return
        client = self._client
        try:
            if client._sock is not None:
                if self.durable is not None and self._processed > self._acked:
                    client.ack(self._processed)
                    self._acked = self._processed
                client.call("unsubscribe")
        except SmarticoError:
            pass  # the daemon is away: it has nothing left to stop; the cursor stays where it was
        finally:
            self._closed = True
            if client._subscription is self:
                client._subscription = None
            client._events.clear()
