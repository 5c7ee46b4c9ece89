"""Errors that become JSON answers: `{"error": {"code": N, "message": "..."}}` (202 differs).

They are plain exceptions so that the store can raise them without knowing about HTTP.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    code = 500

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, **self.extra}}


class BadRequest(ApiError):
    code = 400


class Forbidden(ApiError):
    """Serving this file is not allowed (outside the logdir, or not readable)."""

    code = 403


class NotFound(ApiError):
    code = 404


class MethodNotAllowed(ApiError):
    code = 405


class Unprocessable(ApiError):
    """The worker's file could not be parsed; `messages` says why."""

    code = 422

    def __init__(self, message: str, messages: list[str]) -> None:
        super().__init__(message, messages=list(messages))


class StillLoading(ApiError):
    """The worker span is queued or being parsed: answer 202 and let the client poll, after
    `retry_after_s` (in the body, in ms; the Retry-After header says 1, HTTP's whole seconds)."""

    code = 202

    def __init__(self, progress: float, state: str, retry_after_s: float = 1.0) -> None:
        super().__init__("still loading")
        self.progress = progress
        self.state = state
        self.retry_after_s = retry_after_s

    def body(self) -> dict[str, Any]:
        return {"loading": True, "progress": round(self.progress, 4), "state": self.state,
                "retry_after_ms": round(self.retry_after_s * 1000)}
