"""Assertions shared by the server's test modules (test modules never import each other)."""

from __future__ import annotations

from typing import Any

ERROR_KEYS = {"code", "message"}


def assert_error(reply: Any, status: int) -> dict[str, Any]:
    """A JSON error answer with that status, a message, and no traceback; returns `error`."""
    assert reply.status == status, (reply.url, reply.status, reply.body[:300])
    assert reply.header("content-type").startswith("application/json"), reply.headers
    body = reply.json()
    assert set(body["error"]) >= ERROR_KEYS, body
    assert body["error"]["code"] == status and body["error"]["message"], body
    assert "Traceback" not in reply.body.decode(), reply.body
    return body["error"]
