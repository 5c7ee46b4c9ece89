"""What a view answers instead of a payload. The server maps them to 400 and 404, the CLI to
exit status 2; both print the message as it is."""

from __future__ import annotations


class OptionError(ValueError):
    """A missing, malformed or out-of-range option, or options that do not go together."""


class NotInTrace(LookupError):
    """The options name something the trace does not have (an operator, event, device...)."""
