"""Typed errors: one class per error code of docs/socket-api.md, plus the client's own."""

from __future__ import annotations

from typing import Any, Dict, Optional, Type


class SmarticoError(Exception):
    """Base of every error this package raises.

    ``code`` is the daemon's error code (``"bad_request"``, …), or None for the client's own
    errors (:class:`DaemonUnavailable`, :class:`ClientTimeout`, :class:`ProtocolError`).
    ``message`` is the daemon's text, which names the field and what to do.
    """

    code: Optional[str] = None

    def __init__(self, message: str, code: Optional[str] = None, op: Optional[str] = None,
                 answer: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        #: The op whose answer this is, when known.
        self.op = op
        #: The whole answer line, parsed, when the error came from the daemon.
        self.answer = answer

    def __str__(self) -> str:
        prefix = f"{self.op}: " if self.op else ""
        return f"{prefix}{self.code}: {self.message}" if self.code else f"{prefix}{self.message}"


class BadJSON(SmarticoError):
    """``bad_json``: the line sent was not JSON."""
    code = "bad_json"


class BadRequest(SmarticoError):
    """``bad_request``: a field missing, of the wrong type, out of range or unknown to the op."""
    code = "bad_request"


class UnknownOp(SmarticoError):
    """``unknown_op``: the daemon does not know the op (e.g. ``api`` before issue 28)."""
    code = "unknown_op"


class LineTooLong(SmarticoError):
    """``line_too_long``: a request beyond ``socket.max_line_bytes``; the daemon closes the connection."""
    code = "line_too_long"


class NotPermitted(SmarticoError):
    """``not_permitted``: a control op from a read-role peer, or another uid's durable name."""
    code = "not_permitted"


class NotReady(SmarticoError):
    """``not_ready``: no session in time, or the daemon is shutting down."""
    code = "not_ready"


class ServerError(SmarticoError):
    """``server_error``: Smartico's server answered with ``errCode`` ≠ 0 (``err_code``, ``err_msg``)."""
    code = "server_error"

    def __init__(self, message: str, code: Optional[str] = None, op: Optional[str] = None,
                 answer: Optional[Dict[str, Any]] = None, err_code: Optional[int] = None,
                 err_msg: Optional[str] = None) -> None:
        super().__init__(message, code, op, answer)
        self.err_code = err_code
        self.err_msg = err_msg


class Timeout(SmarticoError):
    """``timeout``: a ``request`` got no answer from the server within ``timeout_ms``."""
    code = "timeout"


class QueueFull(SmarticoError):
    """``queue_full``: the outbox, the pending requests or the durable names of this uid are full."""
    code = "queue_full"


class StorageUnavailable(SmarticoError):
    """``storage_unavailable``: the daemon's state directory is full, read-only or failing; the
    message was not stored, so not accepted. Retry later."""
    code = "storage_unavailable"


class HashCommandFailed(SmarticoError):
    """``hash_command_failed``: ``identify`` without a hash, and the daemon's ``user.hash_command``
    gave none for the user. The daemon keeps the user and retries after its backoff."""
    code = "hash_command_failed"


class TooManyConnections(SmarticoError):
    """``too_many_connections``: the connection was refused at accept."""
    code = "too_many_connections"


class Internal(SmarticoError):
    """``internal``: the daemon failed (journal unreadable, a request lost)."""
    code = "internal"


class OpNotImplemented(SmarticoError):
    """``not_implemented``: the op exists but the daemon does not serve it (daemons before the HTTP
    queue answered it to ``push_report``)."""
    code = "not_implemented"


class DaemonUnavailable(SmarticoError):
    """The daemon's socket cannot be reached, or the connection was lost (a daemon restart).

    ``errno`` is the OS error number when there is one (``ENOENT``: no socket file,
    ``ECONNREFUSED``: nobody listening, ``EACCES``: the socket's mode or group keeps this user out).
    """

    def __init__(self, message: str, path: str, errno: Optional[int] = None) -> None:
        super().__init__(message)
        self.path = path
        self.errno = errno


class ClientTimeout(SmarticoError):
    """The daemon did not answer within the client's own timeout (``Client(timeout=…)``)."""


class ProtocolError(SmarticoError):
    """The daemon sent something that is not the socket API (a line that is not a JSON object)."""


ERRORS_BY_CODE: Dict[str, Type[SmarticoError]] = {
    cls.code: cls  # type: ignore[misc]
    for cls in (BadJSON, BadRequest, UnknownOp, LineTooLong, NotPermitted, NotReady, ServerError,
                Timeout, QueueFull, StorageUnavailable, HashCommandFailed, TooManyConnections, Internal,
                OpNotImplemented)
}


def error_from_answer(answer: Dict[str, Any], op: Optional[str] = None) -> SmarticoError:
    """The typed error for an ``{"ok": false, "error": {…}}`` answer (the base class for a code
    this version does not know)."""
    error = answer.get("error")
    if not isinstance(error, dict):
        return ProtocolError(f"an answer with ok false but no error object: {answer!r}"[:500], op=op)
    code = str(error.get("code", ""))
    message = str(error.get("message", ""))
    cls = ERRORS_BY_CODE.get(code)
    if cls is ServerError:
        return ServerError(message, code, op, answer, err_code=error.get("errCode"),
                           err_msg=error.get("errMsg"))
    if cls is None:
        return SmarticoError(message, code or None, op, answer)
    return cls(message, code, op, answer)
