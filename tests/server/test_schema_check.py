"""The contract check every server test reply goes through must reject what the schema does not
allow: otherwise the validation of every HTTP reply would pass vacuously."""

from __future__ import annotations

import jsonschema
import pytest

from .schema_check import check_reply

BASE = "http://127.0.0.1/data/plugin/torch_prof"


@pytest.mark.parametrize(("route", "status", "body"), [
    ("/overview", 200, {"steps": "not a list"}),
    ("/runs", 200, {"runs": [], "loading": "no", "logdir": ""}),
    ("/kernels/pies", 200, {"rows": []}),
    ("/timeline", 202, {"loading": True}),
    ("/memory", 400, {"error": {"code": "bad", "message": 1}}),
])
def test_a_reply_outside_its_schema_is_rejected(route: str, status: int, body: object) -> None:
    with pytest.raises(jsonschema.ValidationError):
        check_reply(BASE + route, status, body)


def test_an_undocumented_status_is_rejected() -> None:
    with pytest.raises(AssertionError, match="undocumented answer 418"):
        check_reply(BASE + "/overview", 418, {})


def test_a_documented_reply_passes() -> None:
    body = {"loading": True, "progress": 0.5, "state": "loading", "retry_after_ms": 250}
    assert check_reply(BASE + "/overview", 202, body) is body
