"""`/diff?basis=`, `/diff/kernels` and `/diff/default` over HTTP in a real TensorBoard."""

from __future__ import annotations

import csv
import io
from typing import Any

from tests.support import needs_shared

from .harness import TensorBoard, assert_error

CNN = {"run": "cnn_bs32", "worker": "vm_9710", "span": "1"}
CNN64 = {"exp_run": "cnn_bs64", "exp_worker": "vm_9710", "exp_span": "1"}
RESNET = {"run": "resnet50_gpu_pt19"}


def _ok(tb: TensorBoard, route: str, params: dict[str, Any]) -> Any:
    tb.wait_loaded()
    reply = tb.get(route, params)
    assert reply.status == 200, reply.body[:300]
    return reply.json()


def test_diff_basis_over_http(tb: TensorBoard) -> None:
    per_step = _ok(tb, "diff", {**CNN, **CNN64})
    total = _ok(tb, "diff", {**CNN, **CNN64, "basis": "total"})
    assert (per_step["basis"], total["basis"]) == ("per_step", "total")
    steps = per_step["base"]["steps"]
    assert steps == 2
    children = sum(c["left"]["host_duration_us"] for c in total["children"])
    assert abs(total["left"]["host_duration_us"] - children) <= 1e-3 * len(total["children"])
    assert abs(per_step["left"]["host_duration_us"] * steps
               - total["left"]["host_duration_us"]) < 0.01
    assert_error(tb.get("diff", {**CNN, **CNN64, "basis": "mean"}), 400)


def test_diff_kernels_and_csv(tb: TensorBoard) -> None:
    params = {**CNN, **CNN64, "group_by": "operator_kernel"}
    payload = _ok(tb, "diff/kernels", params)
    assert payload["group_by"] == "operator_kernel" and payload["rows"] == []  # CPU samples


@needs_shared
def test_diff_kernels_of_resnet50_and_csv(tb: TensorBoard) -> None:
    tb.wait_loaded()
    spans = tb.get("spans", {"run": "resnet50_gpu_pt19",
                             "worker": _worker(tb, "resnet50_gpu_pt19")}).json()
    worker = _worker(tb, "resnet50_gpu_pt19")
    pair = {**RESNET, "worker": worker, "span": spans[0], "exp_run": "resnet50_gpu_pt19",
            "exp_worker": worker, "exp_span": spans[1]}
    kernels = _ok(tb, "diff/kernels", pair)
    assert kernels["rows"] and kernels["basis"] == "per_step"
    reply = tb.get("diff/kernels", {**pair, "format": "csv"})
    assert reply.status == 200
    rows = list(csv.DictReader(io.StringIO(reply.body.decode("utf-8"))))
    assert [r["name"] for r in rows] == [r["name"] for r in kernels["rows"]]
    assert float(rows[0]["delta_total_us"]) == kernels["rows"][0]["delta_total_us"]


def _worker(tb: TensorBoard, run: str) -> str:
    listing = {r["name"]: r for r in tb.runs()["runs"]}
    return listing[run]["workers"][0]["name"]


def test_diff_default(tb: TensorBoard) -> None:
    same = _ok(tb, "diff/default", CNN)
    assert (same["run"], same["worker"], same["span"], same["reason"]) == (
        "cnn_bs32", "vm_9710", "2", "other_span")
    rank = _ok(tb, "diff/default", {"run": "ddp_gloo", "worker": "vm_9853_rank1", "span": "2"})
    assert (rank["run"], rank["span"], rank["reason"]) == ("ddp_gloo", "1", "other_span")
    alone = _ok(tb, "diff/default", {"run": "gen_cpu", "worker": "cpu", "span": "default"})
    assert alone["reason"] == "similar_run" and alone["run"] != "gen_cpu"
    assert 0 < alone["similarity"] <= 1 and "operator names shared" in alone["message"]
    assert_error(tb.get("diff/default", {"run": "nope", "worker": "w", "span": "1"}), 404)
    assert_error(tb.get("diff/default", {"run": "gen_cpu"}), 400)


def test_timeline_range_route(tb: TensorBoard) -> None:
    timeline = _ok(tb, "timeline", CNN)
    origin = timeline["origin_us"]
    cpu = [t["id"] for t in timeline["tracks"] if t["kind"] == "cpu"][:1]
    params = {**CNN, "start_us": origin, "end_us": origin + 50_000, "tracks": str(cpu[0])}
    payload = _ok(tb, "timeline/range", params)
    assert payload["tracks"] == cpu and payload["events"] == sum(
        r["count"] for r in payload["rows"]) > 0
    totals = [r["total_us"] for r in payload["rows"]]
    assert totals == sorted(totals, reverse=True)
    assert all(r["total_us"] <= r["count"] * 50_000 for r in payload["rows"])  # clipped
    reply = tb.get("timeline/range", {**params, "format": "csv"})
    rows = list(csv.DictReader(io.StringIO(reply.body.decode("utf-8"))))
    assert [r["name"] for r in rows] == [r["name"] for r in payload["rows"]]
    assert_error(tb.get("timeline/range", {**params, "tracks": "0,x"}), 400)
    assert_error(tb.get("timeline/range", {**params, "tracks": "9999"}), 400)
    assert_error(tb.get("timeline/range", {**params, "end_us": origin}), 400)
