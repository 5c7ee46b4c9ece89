"""`torch-prof mcp LOGDIR` end to end: the MCP SDK's own client starts the server as a real
subprocess over stdio, beside a real TensorBoard on the same logdir and cache.

- the tools are exactly the registry's views plus list_runs and sql, and each view tool's input
  schema is its spec's options (names, bounds, choices, required) and run selectors;
- `findings`, `overview` and `operators` answer the HTTP API's payload for the same worker span
  and options, byte for byte once decoded;
- `list_runs` lists the runs TensorBoard lists; `sql`'s `traces` table holds each file's
  event count as `findings` states it;
- an unknown run, a bad option and a broken file are tool errors in words, and the server
  answers the next call.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tb_plugin.views.options import option_fields
from tb_plugin.views.registry import SPECS
from tests.server.harness import TensorBoard

pytestmark = pytest.mark.e2e
TIMEOUT_S = 120


def _session_calls(logdir: Path, env: dict[str, str], calls: list[tuple[str, dict[str, Any]]]
                   ) -> tuple[list[Any], list[Any]]:
    """(the listed tools, each call's result), in one session with a fresh server process."""

    async def main() -> tuple[list[Any], list[Any]]:
        params = StdioServerParameters(command=sys.executable, env=env,
                                       args=["-m", "tb_plugin", "mcp", str(logdir)])
        with anyio.fail_after(3 * TIMEOUT_S):  # a hung server fails the test, not CI
            return await session_calls(params)

    async def session_calls(params: StdioServerParameters) -> tuple[list[Any], list[Any]]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            listed = (await session.list_tools()).tools
            results = [await session.call_tool(name, arguments, read_timeout_seconds=TIMEOUT_S)
                       for name, arguments in calls]
            return listed, results

    return anyio.run(main)


def _json(result: Any) -> Any:
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


def test_mcp_tools_answer_the_http_payloads(tb: TensorBoard, logdir: Path,
                                            server_env: dict[str, str], tmp_path: Path) -> None:
    worker = tb.get("workers", {"run": "cnn_bs32", "view": "Overview"}).json()[0]
    spans = [s["value"] if isinstance(s, dict) else s for s in tb.get(
        "spans", {"run": "cnn_bs32", "worker": worker}).json()]
    where = {"run": "cnn_bs32", "worker": worker, "span": spans[1]}
    calls = [
        ("findings", {**where, "top": 2}),
        ("overview", where),
        ("operators", {**where, "group_by": "operator_input_shape"}),
        ("list_runs", {}),
        ("sql", {"statement": "SELECT span, events AS n FROM traces WHERE run = 'cnn_bs32' "
                              "ORDER BY span", "runs": ["cnn_bs32"]}),
        ("findings", {"run": "nope"}),
        ("findings", {"run": "cnn_bs32", "top": 0}),
        ("findings", {"run": "ddp_broken", "worker": "vm_9999_rank2"}),
        ("findings", {"run": "cnn_bs32", "span": spans[0]}),
    ]
    env = {**server_env, "TORCH_PROF_CACHE_DIR": str(tmp_path / "mcp-cache")}  # its own parse
    listed, results = _session_calls(logdir, env, calls)

    tools = {tool.name: tool for tool in listed}
    assert list(tools) == [*SPECS, "list_runs", "sql"]
    for name, spec in SPECS.items():
        schema = tools[name].input_schema
        fields = option_fields(spec.options)
        assert {f.attr for f in fields} <= set(schema["properties"]), name
        assert {"run", "span"} <= set(schema["properties"]) and "run" in schema["required"]
        assert spec.summary in tools[name].description
        for field in fields:
            prop = schema["properties"][field.attr]
            assert (field.attr in schema["required"]) is field.required
            assert prop.get("enum", []) == list(field.choices)
            assert (prop.get("minimum"), prop.get("maximum")) == (field.minimum, field.maximum)
    assert tools["findings"].input_schema["properties"]["top"]["maximum"] == 13

    http = {"findings": tb.get("findings", {**where, "top": 2}).json(),
            "overview": tb.get("overview", where).json(),
            "operators": tb.get("operators", {**where, "group_by": "operator_input_shape"}
                                ).json()}
    for (name, _), result in zip(calls[:3], results[:3]):
        assert _json(result) == http[name], name
    assert len(_json(results[0])["recommendations"]) <= 2

    runs = {run["name"]: run for run in _json(results[3])["runs"]}
    assert set(runs) == {run["name"] for run in tb.runs()["runs"]}
    assert runs["cnn_bs32"]["workers"] == {worker: spans}

    counts = _json(results[4])
    assert counts["columns"] == ["span", "n"] and counts["truncated"] is False
    per_span = {row["span"]: row["n"] for row in counts["rows"]}
    assert per_span[spans[1]] == _json(results[0])["trace"]["events"]
    assert per_span[spans[0]] == _json(results[8])["trace"]["events"]  # after the errors

    errors = results[5:8]
    assert all(result.is_error for result in errors)
    assert "no run 'nope'; runs: " in errors[0].content[0].text
    assert "from 1 to 13" in errors[1].content[0].text
    assert "vm_9999_rank2" in errors[2].content[0].text
