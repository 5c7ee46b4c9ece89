"""Range aggregate of the Trace view (`/timeline/range`): hand-derived numbers on a small trace,
and a brute-force oracle (a loop over the raw events) on the samples."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from tb_plugin.analysis.timeline.index import build_timeline_index
from tb_plugin.analysis.timeline.range import build_timeline_range
from tb_plugin.analysis.timeline.view import build_timeline
from tb_plugin.load import load_trace

from .helpers import cpu_op, kernel, make_table

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


@pytest.fixture
def table(tmp_path):
    return make_table([
        cpu_op("outer", 0, 100),             # thread 200, depth 0
        cpu_op("a", 10, 30), cpu_op("b", 20, 10),  # a holds b
        cpu_op("a", 60, 20),
        cpu_op("other", 0, 50, tid=300),     # another thread
        kernel(30, 40),                      # a GPU stream
    ], tmp_path)


def _track_ids(table, **match) -> list[int]:
    tracks = build_timeline(table)["tracks"]
    return [t["id"] for t in tracks if all(t[k] == v for k, v in match.items())]


def test_hand_derived_range(table):
    main = _track_ids(table, tid="200")
    out = build_timeline_range(table, 15, 70, main)
    rows = {r["name"]: r for r in out["rows"]}
    assert out["tracks"] == main and out["events"] == 4
    # inside [15, 70]: outer 55; a: 25 (15..40) + 10 (60..70); b: 10 (20..30)
    assert rows["outer"] == {"name": "outer", "count": 1, "total_us": 55, "self_us": 55 - 35,
                             "avg_us": 55}
    assert rows["a"] == {"name": "a", "count": 2, "total_us": 35, "self_us": 35 - 10,
                         "avg_us": 17.5}
    assert rows["b"]["total_us"] == rows["b"]["self_us"] == 10
    assert [r["name"] for r in out["rows"]] == ["outer", "a", "b"]  # by total time
    everything = build_timeline_range(table, 0, 100)
    names = {r["name"]: r["count"] for r in everything["rows"]}
    assert names["other"] == 1 and names["void gemm_kernel<float>()"] == 1


@pytest.mark.parametrize(("start", "end", "tracks", "message"), [
    (10, 10, None, "need start_us < end_us"), (20, 10, None, "need start_us < end_us"),
    (0, 10, [99], "no track 99"),
])
def test_bad_ranges(table, start, end, tracks, message):
    with pytest.raises(ValueError, match=message):
        build_timeline_range(table, start, end, tracks)


def test_brute_force_on_a_sample():
    table = load_trace(str(sorted((SAMPLES / "cnn_bs32").glob("*.pt.trace.json.gz"))[0]),
                       use_cache=False)
    timeline = build_timeline(table)
    tracks = timeline["tracks"]
    events = table.events
    ts, dur = events["ts"].to_numpy(), events["dur"].to_numpy()
    lo = float(np.nanmin(ts)) + 0.3 * (float(np.nanmax(ts + dur)) - float(np.nanmin(ts)))
    hi = lo + 20_000.0
    chosen = [t["id"] for t in tracks if t["kind"] == "cpu"][:2]
    keys = {(tracks[i]["pid"], tracks[i]["tid"]) for i in chosen}
    # events the timeline clamps into their parent (a few python frames end early) are drawn,
    # and so aggregated, with their clamped end: leave their names out of the comparison
    index = build_timeline_index(table)
    drawn = index.position >= 0
    ends = np.full(len(events), np.nan)
    ends[drawn] = index.us(index.ends(index.position[drawn]))
    clamped = drawn & (np.abs(ends - (ts + np.nan_to_num(dur))) > 0.01)
    assert clamped.sum() <= index.clamped
    skip = set(events["name"].astype(str).to_numpy()[clamped])
    counts: dict[str, int] = defaultdict(int)
    totals: dict[str, float] = defaultdict(float)
    for i in range(len(events)):
        if events["ph"].iat[i] != "X" or (str(events["pid"].iat[i]),
                                          str(events["tid"].iat[i])) not in keys:
            continue
        start, end = float(ts[i]), float(ts[i] + dur[i])
        if end < lo or start > hi:
            continue
        name = str(events["name"].iat[i])
        counts[name] += 1
        totals[name] += max(0.0, min(end, hi) - max(start, lo))
    out = build_timeline_range(table, lo, hi, chosen)
    got = {r["name"]: r for r in out["rows"]}
    assert {n: r["count"] for n, r in got.items() if n not in skip} == {
        n: c for n, c in counts.items() if n not in skip}
    assert len(got) > 10 and len(skip) <= index.clamped
    for name, row in got.items():
        if name not in skip:
            assert row["total_us"] == pytest.approx(totals[name], abs=0.01)
        assert 0 <= row["self_us"] <= row["total_us"] + 1e-6
    assert out["events"] == sum(r["count"] for r in got.values())
    assert out["events"] - sum(c for n, c in counts.items() if n not in skip) <= len(skip)


def test_range_numbers_round_to_3_decimals(tmp_path):
    # three calls of 10, 10 and 11 us under a 100 us parent: avg 31 / 3 = 10.3333...
    table = make_table([cpu_op("outer", 0, 100), cpu_op("a", 0, 10), cpu_op("a", 20, 10),
                        cpu_op("a", 40, 11), cpu_op("b", 60, 0.0004)], tmp_path)
    rows = {r["name"]: r for r in build_timeline_range(table, 0, 100)["rows"]}
    assert rows["a"] == {"name": "a", "count": 3, "total_us": 31.0, "self_us": 31.0,
                         "avg_us": 10.333}
    # 0.4 ns is 0 ticks of 1 ns: no time, but the call is counted
    assert rows["b"] == {"name": "b", "count": 1, "total_us": 0.0, "self_us": 0.0,
                         "avg_us": 0.0}
    assert rows["outer"]["self_us"] == 69.0
    # a range that is not whole ns: [0.0005, 29.9995] holds 9.9995 us of a's first call
    part = {r["name"]: r for r in build_timeline_range(table, 0.0005, 29.9995)["rows"]}
    assert part["a"]["count"] == 2 and part["a"]["total_us"] == 19.999


def test_range_rows_by_total_then_name(tmp_path):
    table = make_table([cpu_op("zeta", 0, 10), cpu_op("alpha", 20, 10), cpu_op("mid", 40, 10.5),
                        cpu_op("beta", 60, 2)], tmp_path)
    out = build_timeline_range(table, 0, 100)
    assert [r["name"] for r in out["rows"]] == ["mid", "alpha", "zeta", "beta"]
    assert out["events"] == 4 and out["start_us"] == 0.0 and out["end_us"] == 100.0
    assert build_timeline_range(table, 80, 100)["rows"] == []  # nothing overlaps
