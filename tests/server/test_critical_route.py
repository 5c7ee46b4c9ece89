"""`/timeline?critical_step=` over HTTP in a real TensorBoard (replies schema-checked by the
harness): the events it marks are the GPU Idle payload's path of that step."""

from __future__ import annotations

from tests.support import needs_shared

from .harness import TensorBoard, assert_error


@needs_shared
def test_timeline_marks_the_gpu_idle_path(tb: TensorBoard) -> None:
    tb.wait_loaded()
    run = "resnet50_gpu_pt19"
    worker = {r["name"]: r for r in tb.runs()["runs"]}[run]["workers"][0]["name"]
    span = tb.get("spans", {"run": run, "worker": worker}).json()[0]
    sel = {"run": run, "worker": worker, "span": span}
    idle = tb.get("gpu_idle", sel).json()["critical_path"]
    step = idle["steps"][1]["step"]
    path = set(tb.get("gpu_idle", {**sel, "step": step}).json()["critical_path"]["event_ids"])
    reply = tb.get("timeline", {**sel, "critical_step": step, "width": 16384,
                                "start_us": idle["steps"][1]["start_us"],
                                "end_us": idle["steps"][1]["end_us"]})
    assert reply.status == 200, reply.body[:300]
    payload = reply.json()
    marked = {r["events"]["id"][i] for t in payload["tracks"] for r in t["rows"]
              for i in r["events"]["path"]}
    blocks = sum(len(r["blocks"]["path"]) for t in payload["tracks"] for r in t["rows"])
    assert marked and marked <= path
    assert payload["critical"]["nodes"] == len(path)
    assert blocks > 0 or marked == path  # the rest is inside marked blocks
    ids = list(zip(payload["critical"]["edges"]["from_id"], payload["critical"]["edges"]["to_id"]))
    assert {i for pair in ids for i in pair} == path and len(ids) == len(path) - 1
    assert_error(tb.get("timeline", {**sel, "critical_step": "no-such-step"}), 404)
