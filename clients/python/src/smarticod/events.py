"""Events as the daemon sends them: ``{"event", "seq", "ts", "data"}``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional

#: Events kept in the daemon's journal: replayed after a reconnect (``since``, durable cursors).
JOURNALED_EVENTS = frozenset({"engagement", "minigame", "deeplink", "message"})

#: Every event name a subscription may filter on (``gap`` is always delivered).
EVENT_NAMES = frozenset(JOURNALED_EVENTS | {
    "session", "identified", "props", "game_opening", "bridge", "error", "gap",
})


@dataclass(frozen=True)
class Event:
    """One event line.

    ``seq``: for journaled events (:data:`JOURNALED_EVENTS`) their journal seq, strictly
    increasing; a live-only event carries the seq of the last journaled event sent before it.
    ``ts``: milliseconds since the epoch when the daemon received it. ``data``: the payload,
    keys in the daemon's order.
    """

    name: str
    seq: int
    ts: int
    data: Dict[str, Any] = field(default_factory=dict)

    @property
    def journaled(self) -> bool:
        return self.name in JOURNALED_EVENTS

    @property
    def engagement_uid(self) -> Optional[str]:
        """The engagement this event is about, as text: ``data.message.engagement_uid`` of an
        ``engagement``, ``data.engagement_uid`` of a ``deeplink`` from the server; else None."""
        if self.name == "engagement":
            message = self.data.get("message")
            uid = message.get("engagement_uid") if isinstance(message, dict) else None
        elif self.name == "deeplink":
            uid = self.data.get("engagement_uid")
        else:
            uid = None
        if uid is None or isinstance(uid, bool) or uid == "":
            return None
        return str(uid)

    @property
    def activity_type(self) -> Optional[int]:
        """An ``engagement``'s ``activityType`` (for ``report``), or None when the message has none
        (the daemon then assumes 30)."""
        if self.name != "engagement":
            return None
        message = self.data.get("message")
        if not isinstance(message, dict):
            return None
        value = message.get("activityType", message.get("activity_type"))
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            return value
        if isinstance(value, str) and value.lstrip("-").isdigit():
            return int(value)
        return None

    @classmethod
    def from_line(cls, line: Dict[str, Any]) -> "Event":
        data = line.get("data")
        seq = line.get("seq")
        ts = line.get("ts")
        return cls(
            name=str(line["event"]),
            seq=seq if isinstance(seq, int) else 0,
            ts=ts if isinstance(ts, int) else 0,
            data=data if isinstance(data, dict) else {},
        )
