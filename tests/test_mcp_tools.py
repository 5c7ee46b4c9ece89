"""The MCP server's tools without the transport (`mcp_server.Tools`, `tools()`): the tool list
is the registry's, the errors a client can cause are UsageError/OptionError in words (never a
traceback), and `sql` sends at most SQL_MAX_ROWS rows (1000 whole; 1001 cut, counted).
The stdio end to end test against a real TensorBoard is tests/server/test_mcp.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tb_plugin.cache import TraceCache
from tb_plugin.mcp_server import SQL_MAX_ROWS, Tools, tools
from tb_plugin.reports import UsageError
from tb_plugin.views.errors import OptionError
from tb_plugin.views.registry import SPECS
from tests.support import SAMPLES


def test_tool_names_are_the_registry_and_two_more() -> None:
    assert [tool.name for tool in tools()] == [*SPECS, "list_runs", "sql"]
    schemas = {tool.name: tool.input_schema for tool in tools()}
    assert "worker" not in schemas["distributed"]["properties"]  # every worker of the span
    assert schemas["diff"]["required"] == ["run", "exp_run"]
    assert schemas["operator_stack"]["required"] == ["run", "name"]


@pytest.mark.parametrize(("arguments", "error", "message"), [
    ({}, UsageError, "run is required"),
    ({"run": 123}, UsageError, "no run '123'; runs: cnn_bs32, cnn_bs64"),
    ({"run": "../samples"}, UsageError, "no run '../samples'"),
    ({"run": "cnn_bs32", "top": "abc"}, OptionError, "must be an integer from 1 to 13"),
    ({"run": "cnn_bs32", "top": 14}, OptionError, "must be an integer from 1 to 13"),
    ({"run": "cnn_bs32", "bogus": 1}, UsageError, "bogus not taken by the findings view"),
    ({"run": "cnn_bs32", "worker": "nope"}, UsageError, "no worker 'nope' in cnn_bs32"),
])
def test_errors_are_in_words(arguments: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        Tools(str(SAMPLES), TraceCache(None)).call("findings", arguments)


def test_sql_sends_at_most_1000_rows(tmp_path: Path) -> None:
    answers = Tools(str(SAMPLES), TraceCache(tmp_path / "c"))
    assert SQL_MAX_ROWS == 1000
    for count, truncated in ((1000, False), (1001, True)):
        body = json.loads(answers.call("sql", {
            "statement": f"SELECT range AS i FROM range({count})", "runs": ["cnn_bs32"]}))
        assert body["columns"] == ["i"] and body["total_rows"] == count
        assert body["truncated"] is truncated and len(body["rows"]) == 1000
        assert body["rows"][-1] == {"i": 999}
    with pytest.raises(UsageError, match="no run 'nope'"):
        answers.call("sql", {"statement": "SELECT 1", "runs": ["nope"]})
    with pytest.raises(UsageError):
        answers.call("sql", {"statement": "SELEC nonsense", "runs": ["cnn_bs32"]})
