"""Kernel-level diff and the default experiment of the Diff view, against hand-derived numbers."""

from __future__ import annotations

from typing import Any

import pytest

from tb_plugin.analysis.diff.kernels import build_diff_kernels
from tb_plugin.analysis.diff.pick import Candidate, pick_experiment
from tb_plugin.load import load_trace
from tests.support import SHARED_TRACES, needs_shared

from .helpers import cpu_op, kernel, make_table, runtime, step

GEMM, RELU = "void gemm_kernel<float>()", "void relu_kernel<float>()"


def _trace(steps: int, gemm_us: float, relu_calls: int) -> list[dict[str, Any]]:
    """Per step: aten::mm launches one GEMM; aten::relu launches `relu_calls` RELUs of 5 us;
    the autograd thread (tid 300) launches one more GEMM of 7 us."""
    events: list[dict[str, Any]] = []
    corr = 1
    for i in range(steps):
        t = 1000 * i
        events += [step(i + 1, t, 900), cpu_op("aten::mm", t + 10, 50, ext=corr),
                   runtime(t + 20, 5, corr, ext=corr), kernel(t + 100, gemm_us, corr)]
        corr += 1
        relu = corr
        events.append(cpu_op("aten::relu", t + 200, 100, ext=relu))
        for j in range(relu_calls):
            events += [runtime(t + 210 + 10 * j, 2, corr, ext=relu),
                       kernel(t + 400 + 10 * j, 5, corr, name=RELU)]
            corr += 1
        events += [cpu_op("MmBackward0", t + 500, 50, ext=corr, tid=300),
                   runtime(t + 510, 5, corr, ext=corr, tid=300), kernel(t + 600, 7, corr)]
        corr += 1
    return events


@pytest.fixture
def pair(tmp_path):
    return (make_table(_trace(2, 40, 1), tmp_path), make_table(_trace(4, 30, 3), tmp_path))


def test_by_kernel_per_step_and_total(pair):
    per_step = build_diff_kernels(*pair)
    assert per_step["basis"] == "per_step" and (per_step["base_steps"], per_step["exp_steps"]) \
        == (2, 4)
    rows = {r["name"]: r for r in per_step["rows"]}
    # GEMM per step: base 40 + 7 (autograd thread), exp 30 + 7; RELU: 1 x 5 vs 3 x 5
    assert (rows[GEMM]["base_total_us"], rows[GEMM]["exp_total_us"]) == (47, 37)
    assert (rows[GEMM]["base_calls"], rows[GEMM]["exp_calls"]) == (2, 2)
    assert (rows[RELU]["base_total_us"], rows[RELU]["exp_total_us"]) == (5, 15)
    assert [r["name"] for r in per_step["rows"]] == [GEMM, RELU]  # |-10| = |+10|: by name
    assert per_step["delta_total_us"] == (37 + 15) - (47 + 5)
    total = build_diff_kernels(*pair, basis="total")
    rows = {r["name"]: r for r in total["rows"]}
    assert (rows[GEMM]["base_total_us"], rows[GEMM]["exp_total_us"]) == (2 * 47, 4 * 37)
    assert (rows[RELU]["base_calls"], rows[RELU]["exp_calls"]) == (2, 12)
    assert rows[RELU]["base_mean_us"] == rows[RELU]["exp_mean_us"] == 5
    assert [r["name"] for r in total["rows"]] == [GEMM, RELU]  # +54 before +50


def test_by_operator_and_kernel(pair):
    rows = build_diff_kernels(*pair, group_by="operator_kernel", basis="total")["rows"]
    keyed = {(r["operator"], r["name"]): r for r in rows}
    assert set(keyed) == {("aten::mm", GEMM), ("MmBackward0", GEMM), ("aten::relu", RELU)}
    assert keyed[("MmBackward0", GEMM)]["delta_total_us"] == 4 * 7 - 2 * 7
    assert keyed[("aten::mm", GEMM)]["delta_total_us"] == 4 * 30 - 2 * 40
    deltas = [abs(r["delta_total_us"]) for r in rows]
    assert deltas == sorted(deltas, reverse=True)


@needs_shared
def test_resnet50_kernel_diff_totals_are_every_kernel():
    files = sorted((SHARED_TRACES / "resnet50_gpu_pt19").glob("*.pt.trace.json*"))
    base, exp = (load_trace(str(f), use_cache=False) for f in files[:2])
    payload = build_diff_kernels(base, exp, basis="total")
    for table, key in ((base, "base_total_us"), (exp, "exp_total_us")):
        events = table.events
        kernels = events[events["cat"].astype(str).str.lower() == "kernel"]
        assert payload[key] == pytest.approx(kernels["dur"].sum(), abs=1e-2)
        assert sum(r[key] for r in payload["rows"]) == pytest.approx(payload[key], abs=1)


def _c(run: str, worker: str, span: str, ops: str = "") -> Candidate:
    return Candidate(run, worker, span, frozenset(ops.split()))


def test_default_experiment_order():
    runs = [_c("a", "w0", "1", "mm relu"), _c("a", "w0", "2", "mm relu"),
            _c("a", "w1", "1", "mm"), _c("b", "w", "1", "mm relu add"),
            _c("c", "w", "1", "conv")]
    assert pick_experiment(runs[0], runs)["span"] == "2"  # the same worker's other span
    assert pick_experiment(runs[1], runs)["span"] == "1"  # the last span: the previous one
    other = pick_experiment(runs[2], runs)  # no other span: another worker of the run
    assert (other["reason"], other["worker"], other["span"]) == ("other_worker", "w0", "1")
    similar = pick_experiment(runs[3], runs)  # alone in its run: the most similar run
    assert (similar["reason"], similar["run"]) == ("similar_run", "a")
    assert similar["similarity"] == pytest.approx(2 / 3, abs=1e-4)
    assert "67% of operator names shared" in similar["message"]
    alone = pick_experiment(runs[4], runs[4:])
    assert alone["reason"] == "none" and alone["run"] is None


def test_default_experiment_payloads_in_full():
    runs = [_c("a", "w0", "1", "mm relu"), _c("a", "w0", "2", "mm relu"),
            _c("a", "w0", "3", "mm"), _c("a", "w1", "5", "mm"), _c("a", "w2", "2", "mm"),
            _c("a", "w3", "9", "mm")]
    middle = pick_experiment(runs[1], runs)  # the next span, not the previous
    assert middle == {"run": "a", "worker": "w0", "span": "3", "reason": "other_span",
                      "similarity": None, "message": "span 2 vs span 3 of the same worker"}
    last = pick_experiment(runs[2], runs)
    assert (last["reason"], last["span"]) == ("other_span", "2")
    # another worker: the one with the same span id (w2 has span 2), not the first (w0)
    lone = [_c("a", "w1", "2"), _c("a", "w0", "1"), _c("a", "w2", "2")]
    assert pick_experiment(lone[0], lone) == {
        "run": "a", "worker": "w2", "span": "2", "reason": "other_worker", "similarity": None,
        "message": "worker w1 vs worker w2 of the same run"}
    # no worker has the span: the first other worker in catalogue order
    lone = [_c("a", "w0", "1"), _c("a", "w1", "7"), _c("a", "w2", "8")]
    assert (pick_experiment(lone[1], lone)["worker"], pick_experiment(lone[1], lone)["span"]) \
        == ("w0", "1")
    # a worker with one span goes to another worker, even if that worker has several spans
    assert pick_experiment(runs[3], runs)["worker"] == "w0"
    assert pick_experiment(runs[3], runs)["span"] == "1"


def test_similar_run_scores_ties_and_rounding():
    base = _c("x", "w", "1", "a b c")
    others = [_c("p", "w", "1", "a d"),          # 1 / 4 = 0.25
              _c("q", "w", "1", "a b d"),        # 2 / 4 = 0.5
              _c("r", "w", "1", "a b e"),        # 2 / 4: a tie, the earlier (q) stays
              _c("s", "w", "1", "a")]            # 1 / 3
    picked = pick_experiment(base, [base, *others])
    assert picked == {"run": "q", "worker": "w", "span": "1", "reason": "similar_run",
                      "similarity": 0.5,
                      "message": "the run with the most similar operators (50% of operator "
                                 "names shared)"}
    # 2 / 3 rounded to 4 decimals
    third = pick_experiment(base, [base, _c("t", "w", "1", "a b")])
    assert third["similarity"] == 0.6667 and "(67% of" in third["message"]
    # nothing shared (or no operators at all): still the first other run, with 0
    none = pick_experiment(_c("x", "w", "1"), [_c("x", "w", "1"), _c("m", "w", "1"),
                                               _c("n", "w", "1", "z")])
    assert (none["run"], none["similarity"]) == ("m", 0.0)
    # a run of the base's own is never a "similar run"
    same_run = pick_experiment(base, [base])
    assert same_run == {"run": None, "worker": None, "span": None, "reason": "none",
                        "similarity": None, "message": "no other trace to compare with"}


def test_per_step_basis_falls_back_to_total_without_steps(tmp_path):
    stepless = [event for event in _trace(2, 40, 1) if not event["name"].startswith("Profiler")]
    with_steps = make_table(_trace(2, 40, 1), tmp_path)
    without = make_table(stepless, tmp_path)
    for base, exp in ((with_steps, without), (without, with_steps)):
        payload = build_diff_kernels(base, exp)  # per_step asked, one side has no steps
        assert payload["basis"] == "total"
        # totals, not per step: 2 x (40 + 7) GEMM + 2 x 5 RELU on both sides
        assert payload["base_total_us"] == payload["exp_total_us"] == 2 * 47 + 2 * 5
        assert all(type(r["base_calls"]) is int for r in payload["rows"])
    assert build_diff_kernels(with_steps, with_steps)["basis"] == "per_step"
    assert build_diff_kernels(with_steps, with_steps)["base_total_us"] == 47 + 5


def test_per_step_numbers_are_rounded_to_3_decimals(tmp_path):
    base = make_table(_trace(3, 40.12345, 1), tmp_path)  # GEMM 40.12345 + 7 per step
    exp = make_table(_trace(2, 30.5, 2), tmp_path)       # GEMM 30.5 + 7, RELU 2 x 5
    out = build_diff_kernels(base, exp)
    rows = {r["name"]: r for r in out["rows"]}
    assert rows[GEMM] == {"name": GEMM, "base_calls": 2.0, "exp_calls": 2.0, "delta_calls": 0.0,
                          "base_total_us": 47.123, "exp_total_us": 37.5,
                          "delta_total_us": -9.623,  # 37.5 - 47.12345
                          "base_mean_us": 23.562,    # 47.12345 / 2
                          "exp_mean_us": 18.75}
    assert (out["base_total_us"], out["exp_total_us"], out["delta_total_us"]) == (
        52.123, 47.5, -4.623)  # 47.12345 + 5, 37.5 + 10


def test_kernels_outside_any_operator_are_na(tmp_path):
    events = [cpu_op("aten::mm", 0, 50, ext=1), runtime(10, 5, 1, ext=1), kernel(20, 4, 1),
              runtime(60, 5, 2), kernel(70, 6, 2),     # launched outside any operator
              kernel(90, 8, None, name=RELU)]           # no launch at all
    table = make_table(events, tmp_path)
    rows = build_diff_kernels(table, table, group_by="operator_kernel", basis="total")["rows"]
    assert [(r["operator"], r["name"], r["base_calls"], r["base_total_us"]) for r in rows] == [
        ("N/A", GEMM, 1, 6.0), ("N/A", RELU, 1, 8.0), ("aten::mm", GEMM, 1, 4.0)]
    assert all(r["delta_total_us"] == 0 for r in rows)  # the same trace: ties by the keys
