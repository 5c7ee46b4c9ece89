"""Launch statistics and kernel sequences (`gpu_idle/launch_stats.py`) at their bounds, on
hand-built launches: at most TOP_OUTLIERS outliers, largest first (ties in launch order), no
launch -> no mean/median; sequences: one kernel is no fusion candidate, two are, ordered by GPU
time then count, at most TOP_SEQUENCES."""

from __future__ import annotations

from tb_plugin.analysis.gpu_idle.launch_stats import (
    TOP_OUTLIERS,
    TOP_SEQUENCES,
    annotation_breakdown,
    kernel_sequences,
    launch_stats,
)

from .helpers import cpu_op, kernel, make_table, runtime, step


def test_outliers_bounded_largest_first(tmp_path) -> None:
    # launch i at 100 i, 5 us, its kernel `delay_i` later: delays 20 + i for i < 11, and one
    # tie pair (launches 11 and 12: 25 each), all over the cutoff 10
    delays = [20.0 + i for i in range(11)] + [25.0, 25.0]
    events = [step(1, 0, 10_000)]
    for i, delay in enumerate(delays):
        events += [runtime(100 * i, 5, corr=i + 1),
                   kernel(100 * i + 5 + delay, 1, corr=i + 1, name=f"k{i}")]
    stats = launch_stats(make_table(events, tmp_path), runtime_cutoff_us=50.0,
                         delay_cutoff_us=10.0)
    assert stats["delay_outliers"] == 13 and stats["runtime_outliers"] == 0
    top = stats["top_delay_outliers"]
    expected = sorted(range(13), key=lambda i: (-delays[i], i))[:TOP_OUTLIERS]
    assert [o["name"] for o in top] == [f"k{i}" for i in expected]
    assert [o["delay_us"] for o in top] == [delays[i] for i in expected]
    assert stats["top_runtime_outliers"] == []


def test_no_launch_no_mean(tmp_path) -> None:
    stats = launch_stats(make_table([step(1, 0, 100), cpu_op("aten::add", 10, 5)], tmp_path),
                         runtime_cutoff_us=1.0, delay_cutoff_us=1.0)
    assert (stats["kernels"], stats["mean_delay_us"], stats["median_delay_us"]) == (0, None, None)
    assert (stats["cpu_us_total"], stats["gpu_us_total"], stats["short_kernels"]) == (0.0, 0.0, 0)
    assert stats["histograms"] == {k: {"edges_us": [], "counts": []}
                                   for k in ("cpu_us", "gpu_us", "delay_us")}


def test_sequences_fusion_candidates_and_order(tmp_path) -> None:
    # op "one" launches one kernel of 50 us (twice: 100 us); op "two" launches a then b
    # (10 + 20 us, once: 30 us, a fusion candidate); op "same" launches c twice, 15 us each:
    # the same 30 us, more calls, so before "two"
    events = [step(1, 0, 10_000),
              cpu_op("one", 0, 20, ext=1), runtime(5, 2, corr=1, ext=1), kernel(10, 50, corr=1),
              cpu_op("one", 100, 20, ext=2), runtime(105, 2, corr=2, ext=2),
              kernel(110, 50, corr=2),
              cpu_op("two", 200, 30, ext=3), runtime(205, 2, corr=3, ext=3),
              kernel(210, 10, corr=3, name="a"), runtime(215, 2, corr=4, ext=3),
              kernel(230, 20, corr=4, name="b"),
              cpu_op("same", 300, 10, ext=5), runtime(302, 2, corr=5, ext=5),
              kernel(310, 15, corr=5, name="c"),
              cpu_op("same", 400, 10, ext=6), runtime(402, 2, corr=6, ext=6),
              kernel(410, 15, corr=6, name="c")]
    seqs = kernel_sequences(make_table(events, tmp_path))
    assert [(s["operator"], s["kernels"], s["count"], s["gpu_us"], s["cpu_us"],
             s["fusion_candidate"]) for s in seqs] == [
        ("one", ["void gemm_kernel<float>()"], 2, 100.0, 40.0, False),
        ("same", ["c"], 2, 30.0, 20.0, False),
        ("two", ["a", "b"], 1, 30.0, 30.0, True)]


def test_sequences_bounded(tmp_path) -> None:
    events = [step(1, 0, 100_000)]
    for i in range(TOP_SEQUENCES + 1):  # op i: one kernel of i + 1 us
        events += [cpu_op(f"op{i}", 100 * i, 20, ext=i + 1),
                   runtime(100 * i + 5, 2, corr=i + 1, ext=i + 1),
                   kernel(100 * i + 10, i + 1, corr=i + 1)]
    seqs = kernel_sequences(make_table(events, tmp_path))
    assert [s["operator"] for s in seqs] == [f"op{i}" for i in range(TOP_SEQUENCES, 0, -1)]


def test_annotation_rows_order_and_exclusions(tmp_path) -> None:
    """Host annotations "b" [0,50) and "a" [100,150) each hold one launch of a 10 us kernel;
    "c" [200,260) holds none; "z" has no duration (excluded), the step marker is no
    annotation. Order: GPU time, then wall time, then name: a, b (tie), c."""
    events = [step(1, 0, 1000),
              cpu_op("b", 0, 50, cat="user_annotation"), runtime(10, 2, corr=1),
              kernel(20, 10, corr=1),
              cpu_op("a", 100, 50, cat="user_annotation"), runtime(110, 2, corr=2),
              kernel(120, 10, corr=2),
              cpu_op("c", 200, 60, cat="user_annotation"),
              cpu_op("z", 300, 0, cat="user_annotation")]
    rows = annotation_breakdown(make_table(events, tmp_path))
    assert [(r["side"], r["name"], r["ranges"], r["wall_us"], r["gpu_us"], r["kernels"])
            for r in rows] == [("host", "a", 1, 50.0, 10.0, 1), ("host", "b", 1, 50.0, 10.0, 1),
                               ("host", "c", 1, 60.0, 0.0, 0)]
