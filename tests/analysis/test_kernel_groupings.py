"""The Kernel view's `kernel_op_launch` and the Diff view's `operator_kernel` are two groupings,
not one under two names (`analysis.diff.kernels` says how they differ). Each difference is
pinned on both sides on a hand-built trace, and on real traces the Diff's rows are derived from
the Kernel view's: its rows summed over launch configuration, with the kernels the Kernel view
attributes to a host annotation (the names of the trace's user annotations, read from its
events) moved to `N/A`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tb_plugin.analysis.diff.kernels import build_diff_kernels
from tb_plugin.analysis.kernels import kernel_table
from tb_plugin.ingest.schema import Kind, TraceTable
from tb_plugin.load import load_trace
from tests.support import SAMPLES, SHARED_TRACES, needs_shared

from .helpers import cpu_op, kernel, make_table, runtime, step

LAUNCH = {"registers per thread": 32, "shared memory": 0, "block": [128, 1, 1]}


def _diff_pairs(table: TraceTable) -> dict[tuple[str, str], tuple[float, float]]:
    rows = build_diff_kernels(table, table, "operator_kernel", "total")["rows"]
    return {(r["operator"], r["name"]): (r["base_calls"], r["base_total_us"]) for r in rows}


def test_launch_configuration_splits_the_kernel_view_not_the_diff(tmp_path: Path) -> None:
    """aten::mm launches gemm with grid 16 (10 us) and grid 32 (20 us), aten::add launches it
    with grid 16 (4 us): the Kernel view has three rows, the Diff two, (mm, gemm) 2 calls 30 us."""
    events = [step(1, 0, 1000),
              cpu_op("aten::mm", 0, 100, ext=1), runtime(10, 5, corr=1, ext=1),
              kernel(200, 10, corr=1, grid=[16, 1, 1], **LAUNCH),
              runtime(20, 5, corr=2, ext=1), kernel(300, 20, corr=2, grid=[32, 1, 1], **LAUNCH),
              cpu_op("aten::add", 500, 100, ext=3), runtime(510, 5, corr=3, ext=3),
              kernel(600, 4, corr=3, grid=[16, 1, 1], **LAUNCH)]
    table = make_table(events, tmp_path)
    view = kernel_table(table, "kernel_op_launch")
    got = sorted(zip(view["operator"], view["grid"], view["calls"], view["total_us"]))
    assert got == [("aten::add", "[16, 1, 1]", 1, 4.0), ("aten::mm", "[16, 1, 1]", 1, 10.0),
                   ("aten::mm", "[32, 1, 1]", 1, 20.0)]
    gemm = "void gemm_kernel<float>()"
    assert _diff_pairs(table) == {("aten::mm", gemm): (2, 30.0), ("aten::add", gemm): (1, 4.0)}


def _replay(annotated: bool) -> list[dict[str, Any]]:
    """A graph launch at [100,150) replays k_a (30 us) and k_b (20 us), inside the annotation
    "decode" [0,500) or not; aten::mm [600,700) launches gemm (40 us)."""
    events = [step(1, 0, 1000),
              runtime(100, 50, corr=10, name="cudaGraphLaunch"),
              kernel(200, 30, corr=10, name="k_a"), kernel(230, 20, corr=10, name="k_b"),
              cpu_op("aten::mm", 600, 100, ext=5), runtime(610, 5, corr=11, ext=5),
              kernel(620, 40, corr=11)]
    return [cpu_op("decode", 0, 500, cat="user_annotation"), *events] if annotated else events


@pytest.mark.parametrize("annotated, view_operator", [(True, "decode"), (False, "N/A")])
def test_a_graph_kernel_in_an_annotation_is_named_by_the_kernel_view_only(
        tmp_path: Path, annotated: bool, view_operator: str) -> None:
    table = make_table(_replay(annotated), tmp_path)
    view = kernel_table(table, "kernel_op_launch")
    assert dict(zip(view["name"], view["operator"])) == {
        "k_a": view_operator, "k_b": view_operator, "void gemm_kernel<float>()": "aten::mm"}
    assert _diff_pairs(table) == {("N/A", "k_a"): (1, 30.0), ("N/A", "k_b"): (1, 20.0),
                                  ("aten::mm", "void gemm_kernel<float>()"): (1, 40.0)}


@pytest.mark.parametrize("steps, in_view", [(False, False), (True, True)])
def test_a_kernel_without_launch_is_na_in_the_diff_and_needs_a_step_thread_in_the_view(
        tmp_path: Path, steps: bool, in_view: bool) -> None:
    """`orphan` (7 us) has no correlation: the Diff counts it as N/A; the Kernel view's
    kernel_op_launch shows it (N/A) only when a ProfilerStep thread's root takes it."""
    events = [cpu_op("aten::mm", 0, 50, ext=1), runtime(10, 5, corr=1, ext=1),
              kernel(20, 5, corr=1), kernel(100, 7, name="orphan")]
    table = make_table([step(1, 0, 200), *events] if steps else events, tmp_path)
    view = kernel_table(table, "kernel_op_launch")
    assert (("orphan", "N/A") in set(zip(view["name"], view["operator"]))) is in_view
    assert "orphan" in set(kernel_table(table, "kernel")["name"])  # by name: always
    assert _diff_pairs(table)[("N/A", "orphan")] == (1, 7.0)


def _annotation_names(table: TraceTable) -> set[str]:
    """The trace's user annotations but its ProfilerSteps (op-tree nodes, in both groupings)."""
    events = table.events
    kind = events["kind"].to_numpy()
    names = set(events["name"].astype(str).to_numpy()[kind == Kind.USER_ANNOTATION])
    return {name for name in names if not name.startswith("ProfilerStep#")}


def _check_derived(path: Path) -> None:
    table = load_trace(str(path), use_cache=False)
    view = kernel_table(table, "kernel_op_launch")
    assert int(view["calls"].sum()) == int(kernel_table(table, "kernel")["calls"].sum())
    operator = np.where(view["operator"].isin(_annotation_names(table)), "N/A", view["operator"])
    expected = (pd.DataFrame({"operator": operator, "name": view["name"],
                              "calls": view["calls"], "total": view["total_us"]})
                .groupby(["operator", "name"])[["calls", "total"]].sum())
    got = _diff_pairs(table)
    assert set(got) == set(expected.index)
    for key, (calls, total) in expected.iterrows():
        assert got[key][0] == calls, key
        assert got[key][1] == pytest.approx(total, abs=5e-4), key  # the Diff rounds to 3


SAMPLE_TRACES = sorted(SAMPLES.glob("*/*.pt.trace.json*"))
SHARED = ["alexnet_gpu/worker0.1695835535000.pt.trace.json.gz",
          "amd_mi250_rocm/worker0.1700000000000.pt.trace.json.gz",
          "nccl_collectives/rank0.1700000000000.pt.trace.json.gz",
          "tl_h100_qwen_mem_modules/worker0.pt.trace.json.gz",
          "tl_sglang_decode/worker0.pt.trace.json.gz",
          "tl_vllm_decode_fullgraph/replay.pt.trace.json.gz"]


@pytest.mark.parametrize("path", SAMPLE_TRACES, ids=lambda p: p.name)
def test_the_diff_rows_are_the_kernel_views_on_samples(path: Path) -> None:
    _check_derived(path)


@needs_shared
@pytest.mark.parametrize("name", SHARED)
def test_the_diff_rows_are_the_kernel_views_on_real_traces(name: str) -> None:
    _check_derived(SHARED_TRACES / name)


@needs_shared
def test_graph_replays_really_differ() -> None:
    """The vLLM full-graph replay: 421 of its 425 kernels hang off the annotation
    `execute_32_context_0(...)`, named by the Kernel view and N/A in the Diff."""
    table = load_trace(str(SHARED_TRACES / SHARED[-1]), use_cache=False)
    view = kernel_table(table, "kernel_op_launch")
    by_operator = view.groupby("operator")["calls"].sum()
    annotation = [op for op in by_operator.index if op.startswith("execute_32_context_0")]
    assert len(annotation) == 1 and by_operator[annotation[0]] == 421
    assert annotation[0] in _annotation_names(table)
    diff = _diff_pairs(table)
    assert sum(calls for (op, _), (calls, _t) in diff.items() if op == "N/A") == 421
    assert sum(calls for calls, _t in diff.values()) == 425
