"""`report --view findings` (`analysis.findings`): small, versioned, and every number either
counted again from the raw trace JSON or read off the view it summarises.

- size: at most 8 KB as the CLI prints it (indented JSON) for every trace file of samples/ and
  ../shared/traces (needs_shared), and valid against its payload type;
- health: the counts of the checks are counted again from the raw JSON (kernels, memcpy,
  memset, `Input Dims`, `Call stack`, `[memory]`, flow events), `ok` is count > 0, and only a
  failing check lists the views it affects;
- steps: mean/min/max/slowest are the Overview's steps, the shares are 100 * category / mean;
- recommendations: the Overview's first `top`, in order; `top` 1 and 13 taken, 0 and 14 refused;
- every pointer and evidence pointer names a registry view and builds on that trace;
- `TAB_VIEWS` maps every tab name to a registry view.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tb_plugin.analysis.findings import TAB_VIEWS
from tb_plugin.discovery import discover_runs
from tb_plugin.load import load_trace
from tb_plugin.output.encoding import plain, pretty_json
from tb_plugin.views.errors import OptionError
from tb_plugin.views.findings.options import FindingsOptions
from tb_plugin.views.findings.payload import FindingsPayload
from tb_plugin.views.options import read_options
from tb_plugin.views.registry import SPECS, build_view
from tb_plugin.views.tabs import VIEWS
from tests.support import SAMPLES, SHARED_TRACES, needs_shared

LIMIT = 8 * 1024


def _files(root: Path) -> list[str]:
    return [span.ref.url for run in discover_runs(str(root))
            for spans in run.workers.values() for span in spans]


def _check_size(url: str) -> None:
    payload = build_view(load_trace(url), "findings")
    text = pretty_json(payload)
    assert len(text.encode()) <= LIMIT, (url, len(text.encode()))
    decoded = msgspec.json.decode(text.encode(), type=FindingsPayload)
    assert decoded["schema_version"] == 1


@pytest.mark.parametrize("url", _files(SAMPLES), ids=lambda u: Path(u).name)
def test_findings_fit_in_8_kb_on_the_samples(url: str) -> None:
    _check_size(url)


@needs_shared
def test_findings_fit_in_8_kb_on_every_shared_trace() -> None:
    files = _files(SHARED_TRACES)
    assert len(files) >= 26  # the corpus of SOURCES.tsv and the older traces
    for url in files:
        _check_size(url)


def _raw_events(url: str) -> list[dict[str, Any]]:
    path = url.removeprefix("file://")
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        document = json.load(f)
    return document["traceEvents"] if isinstance(document, dict) else document


def _brute_counts(events: list[dict[str, Any]]) -> dict[str, int]:
    cats = [str(e.get("cat", "")).lower() for e in events]
    args = [e.get("args") or {} for e in events]
    return {
        "gpu": sum(c in ("kernel", "gpu_memcpy", "gpu_memset") for c in cats),
        "shapes": sum("Input Dims" in a for a in args),
        "call_stacks": sum("Call stack" in a for a in args),
        "memory": sum(e.get("name") == "[memory]" for e in events),
        "flows": sum(e.get("ph") in ("s", "f", "t") for e in events),
    }


@pytest.mark.parametrize("run", ["cnn_bs32", "ddp_gloo", "compiled_cpu"])
def test_health_counts_are_the_raw_traces(run: str) -> None:
    url = _files(SAMPLES / run)[0]
    findings = plain(build_view(load_trace(url), "findings"))
    checks = {h["id"]: h for h in findings["health"]}
    for name, count in _brute_counts(_raw_events(url)).items():
        detail = checks[name]["detail"]
        assert int(detail.split()[0]) == count, (name, detail)
        assert checks[name]["ok"] is (count > 0), name
        assert (checks[name]["affects"] == []) is (count > 0), name
    assert checks["parse"] == {"id": "parse", "ok": True, "detail": "ok", "affects": []}
    assert findings["trace"]["device"] == "CPU" and findings["gpus"] == []


@needs_shared
def test_health_on_a_gpu_trace_and_a_capture_trace() -> None:
    url = _files(SHARED_TRACES / "alexnet_gpu")[0]
    findings = plain(build_view(load_trace(url), "findings"))
    checks = {h["id"]: h for h in findings["health"]}
    kernels = _brute_counts(_raw_events(url))["gpu"]
    assert kernels > 0 and checks["gpu"]["ok"] is True and checks["gpu"]["affects"] == []
    assert findings["trace"]["device"] == "GPU" and len(findings["gpus"]) >= 1
    capture = _files(SHARED_TRACES / "tl_vllm_decode_fullgraph" / "capture")[0]
    graphs = {h["id"]: h for h in plain(build_view(load_trace(capture), "findings"))["health"]}
    assert graphs["graphs"]["ok"] is False and "roofline" in graphs["graphs"]["affects"]


def test_steps_are_the_overviews() -> None:
    table = load_trace(_files(SAMPLES / "ddp_gloo")[0])
    overview = plain(build_view(table, "overview"))
    steps = plain(build_view(table, "findings"))["steps"]
    totals = [s["total_us"] for s in overview["steps"]]
    mean = overview["average"]["total_us"]
    assert steps["count"] == len(totals) == 2 and steps["from_markers"] is True
    assert steps["mean_us"] == round(mean, 1)
    assert (steps["min_us"], steps["max_us"]) == (round(min(totals), 1), round(max(totals), 1))
    assert steps["slowest"] == overview["steps"][totals.index(max(totals))]["name"]
    shares = {c: round(100 * us / mean, 1) for c, us in overview["average"]["breakdown_us"].items()
              if us > 0}
    assert steps["breakdown_pct"] == shares
    assert list(shares) == [c for c in overview["categories"] if c in shares]


@needs_shared
def test_recommendations_are_the_overviews_first_top() -> None:
    table = load_trace(_files(SHARED_TRACES / "param_dlrm_8ranks_nccl")[4])
    every = plain(build_view(table, "overview"))["recommendations"]
    assert len(every) == 6
    for top, kept in ((1, 1), (5, 5), (13, 6)):
        findings = plain(build_view(table, "findings", top=top))
        assert [r["id"] for r in findings["recommendations"]] == [r["id"] for r in every][:kept]
        assert findings["recommendations_total"] == 6
        for mine, theirs in zip(findings["recommendations"], every):
            assert (mine["saving_us"], mine["saving_pct"], mine["whatif"]) == (
                theirs["saving_us"], theirs["saving_pct"], theirs["whatif"])
            assert theirs["text"].startswith(mine["text"].removesuffix("..."))
            assert len(mine["text"]) <= 300
    for good in ("1", "13"):  # as the server reads its query string and the CLI its flags
        assert read_options(FindingsOptions, {"top": good}.get).top == int(good)
    for bad in ("0", "14"):
        with pytest.raises(OptionError, match="from 1 to 13"):
            read_options(FindingsOptions, {"top": bad}.get)


def _follow(table: Any, pointer: dict[str, Any]) -> None:
    """Build the view a pointer names with its options (a SPAN view over this one worker)."""
    spec = SPECS[pointer["view"]]
    if spec.kind == "span":
        build_view({"w": table}, pointer["view"], {}, **pointer["options"])
    else:
        build_view(table, pointer["view"], **pointer["options"])


@pytest.mark.parametrize("run", ["cnn_bs64", "ddp_gloo"])
def test_every_pointer_builds_on_its_trace(run: str) -> None:
    for url in _files(SAMPLES / run):
        table = load_trace(url)
        findings = plain(build_view(table, "findings"))
        pointers = findings["pointers"] + [r["evidence"] for r in findings["recommendations"]]
        assert {p["view"] for p in pointers} >= {"overview", "operators", "timeline_range"}
        for pointer in pointers:
            _follow(table, pointer)


@needs_shared
def test_every_pointer_builds_on_a_gpu_trace() -> None:
    table = load_trace(_files(SHARED_TRACES / "param_dlrm_8ranks_nccl")[0])
    findings = plain(build_view(table, "findings"))
    pointers = findings["pointers"] + [r["evidence"] for r in findings["recommendations"]]
    assert {"kernels", "gpu_idle", "roofline", "whatif"} <= {p["view"] for p in pointers}
    for pointer in pointers:
        _follow(table, pointer)


def test_tab_views_cover_every_tab() -> None:
    assert set(TAB_VIEWS) == {view.name for view in VIEWS.values()}
    assert all(name in SPECS and SPECS[name].view == tab or tab == "Trace"
               for tab, name in TAB_VIEWS.items())


@needs_shared
def test_a_serving_trace_points_to_the_inference_view() -> None:
    """The Inference pointer is there exactly when the trace has serving step annotations."""
    serving = SHARED_TRACES / "tl_sglang_prefilldecode" / "worker0.pt.trace.json.gz"
    views = [p["view"] for p in plain(build_view(load_trace(str(serving)), "findings"))[
        "pointers"]]
    assert "inference" in views
    training = next((SAMPLES / "cnn_bs32").glob("*.json*"))
    views = [p["view"] for p in plain(build_view(load_trace(str(training)), "findings"))[
        "pointers"]]
    assert "inference" not in views
