"""What a view answers instead of a payload. The server maps them to 400 and 404, the CLI to
exit status 2; both print the message as it is."""

from __future__ import annotations


class OptionError(ValueError):
    """A missing, malformed or out-of-range option, or options that do not go together."""


class Unreadable(ValueError):
    """A file the view reads was refused or cannot be read (an allocator snapshot that is not
    plain data, too big, or not a snapshot): the server answers 422, the CLI exit status 1."""


class NotInTrace(LookupError):
    """The options name something the trace does not have (an operator, event, device...)."""
