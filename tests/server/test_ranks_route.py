"""`/ranks` (all ranks on one timeline) end to end on the session's TensorBoard: the reply is
the registry builder's answer on the same files (the numbers are checked in
tests/analysis/test_dist_timeline.py), the CLI prints the same payload, and bad options are
400 with the same message in the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tb_plugin import cli
from tb_plugin.discovery import discover_runs
from tb_plugin.load import load_trace
from tb_plugin.output.encoding import plain
from tb_plugin.views.registry import build_view
from tests.support import need

from .harness import TensorBoard, assert_error


def _tables(logdir: Path, run: str, span: str) -> dict[str, Any]:
    info = next(r for r in discover_runs(str(logdir)) if r.name == run)
    return {w: load_trace(info.span_file(w, span).ref) for w in info.workers}


def test_ranks_route_cli_and_errors(tb: TensorBoard, logdir: Path, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    params = {"run": "ddp_gloo", "span": "1", "host": "on", "width": "400"}
    reply = tb.get("ranks", params)
    assert reply.status == 200, reply.body[:300]
    payload = reply.json()
    expected = build_view(_tables(logdir, "ddp_gloo", "1"), "ranks", {}, host="on", width=400)
    assert payload == plain(expected)
    assert [lane["rank"] for lane in payload["lanes"]] == [0, 1]
    code = cli.main(["--cache-dir", str(tmp_path), "report", str(logdir), "--run", "ddp_gloo",
                     "--span", "1", "--view", "ranks", "--host", "on", "--width", "400"])
    assert code == 0 and json.loads(capsys.readouterr().out) == payload
    moved = tb.get("ranks", {**params, "offsets": "1:12.5"}).json()
    assert [lane["offset_us"] for lane in moved["lanes"]][1] == 12.5
    for bad, message in (({"ranks": "7"}, "no rank 7"), ({"offsets": "3:1"}, "not shown"),
                         ({"ranks": "0,1,2,3,4,5,6,7,8"}, "ranks"),
                         ({"start_us": "5", "end_us": "1"}, "start_us < end_us")):
        error = assert_error(tb.get("ranks", {**params, **bad}), 400)
        assert message in error["message"], (bad, error)


def test_ranks_on_shared_ddp(tb: TensorBoard, shared_runs: list[str]) -> None:
    need("ddp_2ranks_sampled" in shared_runs, "../shared/traces/ddp_2ranks_sampled")
    reply = tb.get("ranks", {"run": "ddp_2ranks_sampled", "span": "1", "width": "800"})
    assert reply.status == 200, reply.body[:300]
    payload = reply.json()
    assert [lane["rank"] for lane in payload["lanes"]] == [0, 1]
    assert payload["links"]["total"] > 0 and payload["flows"]["cats"] == ["collective"]
    assert len(reply.body) < 1 << 20
