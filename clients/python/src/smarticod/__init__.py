"""A client for smarticod's local socket API (docs/socket-api.md), standard library only.

>>> from smarticod import Client
>>> with Client() as client:
...     for event in client.subscribe(types=["engagement"], durable="kiosk"):
...         ...
"""

from .client import DEFAULT_SOCKET, Client, Subscription, default_socket_path
from .errors import (ERRORS_BY_CODE, BadJSON, BadRequest, ClientTimeout, DaemonUnavailable,
                     HashCommandFailed, Internal, LineTooLong, NotPermitted, NotReady, OpNotImplemented,
                     ProtocolError, QueueFull, ServerError, SmarticoError, StorageUnavailable,
                     Timeout, TooManyConnections, UnknownOp, error_from_answer)
from .events import EVENT_NAMES, JOURNALED_EVENTS, Event

__version__ = "0.1.0"

__all__ = [
    "Client", "Subscription", "Event", "DEFAULT_SOCKET", "default_socket_path",
    "EVENT_NAMES", "JOURNALED_EVENTS", "ERRORS_BY_CODE", "error_from_answer",
    "SmarticoError", "BadJSON", "BadRequest", "UnknownOp", "LineTooLong", "NotPermitted",
    "NotReady", "ServerError", "Timeout", "QueueFull", "StorageUnavailable", "HashCommandFailed", "TooManyConnections", "Internal",
    "OpNotImplemented", "DaemonUnavailable", "ClientTimeout", "ProtocolError",
]
