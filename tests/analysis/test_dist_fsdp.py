"""FSDP awareness of the Distributed view: all-gather / reduce-scatter grouped by module, with
the prefetch overlap per layer, on a generated FSDP-like two-rank trace
(tests/support/fsdp_trace.py) whose numbers are derived by hand below. No real FSDP trace is in
../shared/traces (none has module events around its collectives), so the real traces only check
the "no module events" answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tb_plugin.analysis.distributed.run import build_distributed
from tb_plugin.analysis.distributed.summary import rank_summary
from tb_plugin.load import load_trace
from tests.analysis.helpers import make_table
from tests.support import SHARED_TRACES, needs_shared
from tests.support.fsdp_trace import FIRST_GATHER_END, distributed_info, fsdp_events


def _rank(tmp_path: Path, rank: int) -> Any:
    return make_table(fsdp_events(FIRST_GATHER_END[rank]), tmp_path,
                      distributedInfo=distributed_info(rank))


def test_summary_attributes_calls_to_modules(tmp_path: Path) -> None:
    summary = rank_summary(_rank(tmp_path, 0))
    assert summary.module_source == "nn.Module + FSDP annotations"
    assert list(zip(summary.calls.collective, summary.calls.module,
                    summary.calls.compute_overlap)) == [
        ("all_gather", "Block_0", 115.0),  # [15, 215) ∩ [100, 400)
        ("all_gather", "Block_1", 50.0),  # [1300, 1400) ∩ [1000, 1350)
        ("reduce_scatter", "layers.1", 50.0),  # [2050, 2250) ∩ [2200, 2500)
        ("all_gather", "", 0.0)]  # outside every module, no computation beside it


def test_fsdp_layers_and_prefetch_overlap(tmp_path: Path) -> None:
    payload = build_distributed({"r0": _rank(tmp_path, 0), "r1": _rank(tmp_path, 1)})
    layers = payload["fsdp_layers"]
    assert layers["source"] == "nn.Module + FSDP annotations" and layers["note"] == ""
    rows = [(r["module"], r["collective"], r["ranks"], r["calls"], r["time_us"],
             r["overlap_us"], r["exposed_us"], r["overlap_share"]) for r in layers["rows"]]
    assert rows == [
        # rank 0: 200 us, 115 overlapped; rank 1: [15, 115) -> 100 us, 15 overlapped
        ("Block_0", "all_gather", 2, 2, 300.0, 130.0, 170.0, round(130 / 300, 4)),
        ("Block_1", "all_gather", 2, 2, 200.0, 100.0, 100.0, 0.5),
        ("layers.1", "reduce_scatter", 2, 2, 400.0, 100.0, 300.0, 0.25)]
    assert (layers["unattributed_calls"], layers["unattributed_us"]) == (2, 200.0)
    assert (layers["total"], layers["truncated"]) == (3, False)
    advice = [r for r in payload["recommendations"] if r.startswith("FSDP prefetch")]
    assert advice and "1 of 2 layers" in advice[0] and "(Block_0)" in advice[0]
    assert "0.17 ms of all-gather is exposed" in advice[0]


@needs_shared
def test_real_traces_have_no_module_events() -> None:
    tables = {p.name.split(".")[0]: load_trace(str(p)) for p in sorted(
        (SHARED_TRACES / "ddp_2ranks_sampled").glob("*.pt.trace.json*"))}
    layers = build_distributed(tables)["fsdp_layers"]
    assert (layers["source"], layers["rows"], layers["total"]) == ("", [], 0)
    assert layers["note"].startswith("No module events")
    assert layers["unattributed_calls"] == 4  # the run's two all-gathers on each rank

