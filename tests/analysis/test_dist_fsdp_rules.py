"""`fsdp_layers` / `fsdp_advice` at their rules, on hand-built call frames (the columns
`call_frame` gives: worker `w`, collective, module, bytes, duration `d`, compute_overlap): only
all-gathers and reduce-scatters, grouped by (module, collective) in first-seen order, the
overlap clipped to the time, a zero time giving a zero share, calls outside every module
counted as unattributed, at most MAX_FSDP_ROWS rows, and the advice below LOW_OVERLAP only.
The module source comes from real summaries of the generated FSDP trace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tb_plugin.analysis.distributed.fsdp import LOW_OVERLAP, MAX_FSDP_ROWS, fsdp_advice, fsdp_layers
from tb_plugin.analysis.distributed.summary import rank_summary
from tests.analysis.helpers import cpu_op, make_table
from tests.support.fsdp_trace import FIRST_GATHER_END, distributed_info, fsdp_events

NO_MODULES = ("No module events in the traces: record with with_stack=True (nn.Module events) "
              "or FSDP2 (its record functions name the module) to group all-gathers and "
              "reduce-scatters by layer.")


def _calls(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["w", "collective", "module", "bytes", "d",
                                       "compute_overlap"])


def _summaries(tmp_path: Path) -> dict[str, Any]:
    return {"r0": rank_summary(make_table(fsdp_events(FIRST_GATHER_END[0]), tmp_path,
                                          distributedInfo=distributed_info(0)))}


def test_layers_group_clip_and_count_unattributed() -> None:
    calls = _calls([
        (0, "all_gather", "L0", 10, 100.0, 30.0),
        (0, "reduce_scatter", "L0", 20, 40.0, 60.0),  # overlap above the time: clipped to 40
        (0, "all_gather", "L1", 5, 0.0, 0.0),  # no time: share 0
        (0, "all_reduce", "L1", 7, 500.0, 0.0),  # not an FSDP kind: ignored
        (1, "all_gather", "L0", 10, 50.0, 80.0),  # per call above, summed: 110 of 150
        (1, "all_gather", "", 3, 25.0, 0.0),
        (1, "reduce_scatter", np.nan, 4, 12.5, 0.0),  # no module either
        (1, "all_gather", "L2", 8, 40.0, 10.0)])
    out = fsdp_layers({}, calls)
    assert {k: out[k] for k in ("source", "total", "truncated", "unattributed_calls",
                                "unattributed_us", "note")} == {
        "source": "", "total": 4, "truncated": False, "unattributed_calls": 2,
        "unattributed_us": 37.5, "note": ""}
    assert out["rows"] == [
        {"module": "L0", "collective": "all_gather", "ranks": 2, "calls": 2, "bytes": 20,
         "time_us": 150.0, "overlap_us": 110.0, "exposed_us": 40.0,
         "overlap_share": round(110 / 150, 4)},
        {"module": "L0", "collective": "reduce_scatter", "ranks": 1, "calls": 1, "bytes": 20,
         "time_us": 40.0, "overlap_us": 40.0, "exposed_us": 0.0, "overlap_share": 1.0},
        {"module": "L1", "collective": "all_gather", "ranks": 1, "calls": 1, "bytes": 5,
         "time_us": 0.0, "overlap_us": 0.0, "exposed_us": 0.0, "overlap_share": 0.0},
        {"module": "L2", "collective": "all_gather", "ranks": 1, "calls": 1, "bytes": 8,
         "time_us": 40.0, "overlap_us": 10.0, "exposed_us": 30.0, "overlap_share": 0.25}]


def test_zero_time_rows_share_zero_among_many() -> None:
    # many zero-time layers: each share is 0 (never a leftover value of the division); a
    # layer of half a microsecond has its share
    calls = _calls([(0, "all_gather", f"L{i}", 1, 0.0 if i % 2 else 3.0, 1.5)
                    for i in range(64)] + [(0, "all_gather", "half", 1, 0.5, 0.25)])
    shares = [r["overlap_share"] for r in fsdp_layers({}, calls)["rows"]]
    assert shares == [0.0 if i % 2 else 0.5 for i in range(64)] + [0.5]


def test_rows_bounded_in_first_seen_order() -> None:
    count = MAX_FSDP_ROWS + 1
    calls = _calls([(0, "all_gather", f"m{count - i}", 1, 2.0, 1.0) for i in range(count)])
    out = fsdp_layers({}, calls)
    assert (out["total"], out["truncated"], len(out["rows"])) == (count, True, MAX_FSDP_ROWS)
    assert [r["module"] for r in out["rows"]] == [f"m{count - i}" for i in range(MAX_FSDP_ROWS)]
    exact = fsdp_layers({}, calls.iloc[:MAX_FSDP_ROWS])
    assert (exact["total"], exact["truncated"], len(exact["rows"])) == (
        MAX_FSDP_ROWS, False, MAX_FSDP_ROWS)


def test_notes_without_modules(tmp_path: Path) -> None:
    summaries = _summaries(tmp_path)
    source = "nn.Module + FSDP annotations"
    empty = _calls([])
    assert fsdp_layers(summaries, empty) == {  # no calls at all
        "source": source, "total": 0, "truncated": False, "rows": [], "unattributed_calls": 0,
        "unattributed_us": 0.0, "note": NO_MODULES}
    assert fsdp_layers({}, empty)["note"] == NO_MODULES
    one = _calls([(0, "all_gather", "L0", 1, 5.0, 1.0)])
    assert fsdp_layers(summaries, one.drop(columns=["module"]))["note"] == NO_MODULES
    assert fsdp_layers(summaries, one.drop(columns=["compute_overlap"]))["note"] == NO_MODULES
    outside = _calls([(0, "all_gather", "", 1, 5.0, 1.0), (0, "all_reduce", "L0", 1, 5.0, 1.0)])
    with_source = fsdp_layers(summaries, outside)
    assert (with_source["note"], with_source["unattributed_calls"],
            with_source["unattributed_us"], with_source["rows"]) == (
        "No all-gather or reduce-scatter inside a module event.", 1, 5.0, [])
    assert fsdp_layers({}, outside)["note"] == NO_MODULES  # and no module source at all


def _row(module: str, collective: str, share: float, exposed: float) -> dict[str, Any]:
    return {"module": module, "collective": collective, "overlap_share": share,
            "exposed_us": exposed}


def test_advice_below_half_overlap_only() -> None:
    assert LOW_OVERLAP == 0.5
    at = {"rows": [_row("A", "all_gather", 0.5, 100.0)]}
    assert fsdp_advice(at) == []
    rows = [_row("A", "all_gather", 0.4999, 8000.0), _row("B", "all_gather", 0.5, 100.0),
            _row("C", "reduce_scatter", 0.0, 9000.0), _row("D", "all_gather", 0.0, 2000.0)]
    assert fsdp_advice({"rows": rows}) == [
        "FSDP prefetch: the all-gathers of 2 of 3 layers overlap computation for under 50% of "
        "their time (A, D); 10.00 ms of all-gather is exposed over all ranks. Consider "
        "forward_prefetch=True and backward_prefetch=BACKWARD_PRE (FSDP1), or explicit "
        "prefetching (FSDP2 set_modules_to_forward_prefetch), and check that "
        "limit_all_gathers / reshard_after_forward do not serialise them."]


def test_advice_names_five_layers_then_ellipsis() -> None:
    five = [_row(f"L{i}", "all_gather", 0.1, 10.0) for i in range(5)]
    assert "(L0, L1, L2, L3, L4);" in fsdp_advice({"rows": five})[0]
    six = five + [_row("L5", "all_gather", 0.1, 10.0)]
    text = fsdp_advice({"rows": six})[0]
    assert "of 6 of 6 layers" in text and "(L0, L1, L2, L3, L4 ...);" in text
    assert "0.06 ms of all-gather" in text


def test_sources_of_several_ranks_are_joined(tmp_path: Path) -> None:
    fsdp = _summaries(tmp_path)["r0"]  # "nn.Module + FSDP annotations"
    nn_only = rank_summary(make_table([cpu_op("nn.Module: A", 0, 10, cat="python_function")],
                                      tmp_path))
    assert nn_only.module_source == "nn.Module"
    # each source named once, in one order
    for pair in ({"a": nn_only, "b": fsdp}, {"a": fsdp, "b": nn_only}):
        assert fsdp_layers(pair, _calls([]))["source"] == "nn.Module + FSDP annotations"
    assert fsdp_layers({"a": nn_only, "b": nn_only}, _calls([]))["source"] == "nn.Module"
