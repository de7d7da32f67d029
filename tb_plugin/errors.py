"""The package's public exception types.

`TraceError` is the only exception the loader lets escape: whatever is wrong with a trace
file (unreadable, truncated, not JSON, not a Kineto trace, ...) is reported through it, with
the file and the reason in the message.
"""


class TraceError(Exception):
    """A trace file could not be read or is not a usable Kineto trace.

    Attributes
    ----------
    path : str
        The file (local path or URL) the error is about.
    reason : str
        What is wrong with it, in words meant for the user.
    """

    def __init__(self, path, reason):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class PathOutsideLogdirError(TraceError):
    """A requested path resolves outside the directory the server was given."""


class FileAccessError(TraceError):
    """The file could not be opened, stat'ed or read (no permission, vanished, a network
    error): a state of the file system, not of the trace, so it is tried again rather than
    remembered (a `chmod` fixes it without changing the file's size or mtime)."""
