"""The package's public exception types: one base, `PublicError`, with an HTTP status and a
reason meant for the user, and its kinds.

- `NotFoundError` (404): a run, worker, span, device or event that does not exist (now);
- `BadParameterError` (400): a request parameter that is missing or not valid;
- `StillLoadingError` (202): the profile asked for is being parsed; the reply carries progress;
- `ReplyTooLargeError` (413): the answer asked for would be larger than one reply may be within
  the memory budget; the reason says how to ask for less;
- `TraceError` (422): a trace file could not be read or is not a usable Kineto trace. It is the
  only exception the loader lets escape, with the file and the reason in the message.

The HTTP layer turns every `PublicError` into `{"error": code, "reason": ..., ...}` with its
status (`PublicError.body`); anything else is a logged 500. The Python API raises the same
types, so `except tb_plugin.TraceError` and `except KeyError` (a `NotFoundError` is one) work
for callers.
"""

import time
from typing import Any


def os_reason(exc: BaseException) -> str:
    """What went wrong in an `OSError` (or another I/O exception), without the file names it
    carries: a reply names files relative to the log directory, never by the server's paths."""
    if isinstance(exc, OSError):  # an object store's errors may hold only a key: its type then
        return exc.strerror or type(exc).__name__
    return str(exc)


class PublicError(Exception):
    """A problem whose reason may be shown to the user, answered with HTTP `status`.

    Attributes
    ----------
    status : int
        The HTTP status the server answers with.
    error : str
        A short machine-readable code ("not_found", "bad_parameter", ...).
    reason : str
        What is wrong, in words meant for the user.
    """

    status = 400
    error = "bad_request"

    def __init__(self, reason: str, *, status: int | None = None, error: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        if status is not None:
            self.status = status
        if error is not None:
            self.error = error

    def __str__(self) -> str:  # the reason, also for the KeyError kind (whose str() would quote it)
        return self.reason

    def body(self) -> dict[str, Any]:
        """The JSON body of the reply."""
        return {"error": self.error, "reason": self.reason}


class NotFoundError(PublicError, KeyError):
    """A run, worker, span, device or event that does not exist (now). A `KeyError` too, so a
    look-up by name in the Python API fails the way a dict look-up does."""

    status = 404
    error = "not_found"


class BadParameterError(PublicError, ValueError):
    """A request parameter that is missing (error code "missing_parameter") or not valid."""

    status = 400
    error = "bad_parameter"


class ReplyTooLargeError(PublicError):
    """The answer asked for would take more memory to build than one reply may hold within
    the memory budget (`--profiler_max_memory_mb`); the reason says how large it would be and
    how to ask for less. Refused before it is built."""

    status = 413
    error = "reply_too_large"


class StillLoadingError(PublicError):
    """The profile asked for is being parsed: answered 202 with its progress. A view over
    several profiles also says how many of them are `ready` of the `total` it needs.

    `since` is the epoch time the load started, `stage` one of `stages.STAGE_*`, `fraction`
    how much of the JSON is read (0 to 1) while parsing, else None."""

    status = 202
    error = "loading"

    def __init__(self, path: str, since: float, stage: str, fraction: float | None = None,
                 ready: int | None = None, total: int | None = None) -> None:
        super().__init__(f"{path} is still loading")
        self.path, self.since, self.stage, self.fraction = path, since, stage, fraction
        self.ready, self.total = ready, total

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"loading": True, "path": self.path, "elapsed_seconds": round(time.time() - self.since, 3),
                "stage": self.stage, "fraction": None if self.fraction is None else round(self.fraction, 4)}
        if self.total is not None:
            body.update(ready=self.ready, total=self.total)
        return body


class TraceError(PublicError):
    """A trace file could not be read or is not a usable Kineto trace.

    Attributes
    ----------
    path : str
        The file (local path or URL) the error is about.
    reason : str
        What is wrong with it, in words meant for the user.
    """

    status = 422
    error = "bad_trace"

    def __init__(self, path: object, reason: str) -> None:
        self.path = str(path)
        super().__init__(reason)
        self.args = (f"{self.path}: {reason}",)

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"

    def __reduce__(self) -> tuple[type, tuple[str, str]]:  # rebuilt from (path, reason) when pickled (worker processes)
        return type(self), (self.path, self.reason)

    def body(self) -> dict[str, Any]:
        return {"error": self.error, "reason": self.reason, "path": self.path}


class PathOutsideLogdirError(TraceError):
    """A requested path resolves outside the directory the server was given."""


class FileAccessError(TraceError):
    """The file could not be opened, stat'ed or read (no permission, vanished, a network
    error): a state of the file system, not of the trace, so it is tried again rather than
    remembered (a `chmod` fixes it without changing the file's size or mtime)."""
