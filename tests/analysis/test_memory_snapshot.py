"""The snapshot view: curves anchored at the dump, segments and blocks at an instant, the
largest live allocations at the peak, OOMs, the trace clock, level of detail. Oracles: the hand
snapshot's values derived by hand (tests/ingest/snapshots.py), and the ground truth a small
caching-allocator simulation keeps after every entry."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tb_plugin.analysis.memory import snapshot as snapshot_module
from tb_plugin.analysis.memory import snapshot_state
from tb_plugin.analysis.memory.snapshot import (
    UnknownSnapshotDeviceError,
    build_memory_snapshot,
    overlaps_trace,
)
from tb_plugin.ingest.snapshot import read_snapshot, to_columns
from tb_plugin.load import load_trace
from tb_plugin.views.errors import Unreadable
from tb_plugin.views.registry import build_view
from tests.analysis.helpers import make_table
from tests.ingest.snapshots import (
    KIB,
    MIB,
    PRE,
    SEG,
    T0,
    Simulated,
    entry,
    evil_pickles,
    hand_snapshot,
    into_trace_period,
    write,
)
from tests.support import SAMPLES, need_shipped


@pytest.fixture()
def hand(tmp_path: Path):
    return read_snapshot(write(tmp_path / "s.pickle", hand_snapshot()))


def _values(curve: dict, key: str) -> list[int]:
    """The value after each entry, from an undown-sampled step curve (points 0, 2, 4...)."""
    return curve[key][::2]


def test_curves_are_anchored_at_the_dump(hand) -> None:
    p = build_memory_snapshot(hand, "s.pickle")
    assert p["clock"] == "snapshot" and p["device"] == "GPU0" and p["entries"] == 7
    # before the trace: P (8 MiB) allocated in a 20 MiB segment
    assert _values(p["curve"], "allocated") == [
        8 * MIB, 9 * MIB, 9 * MIB + 512 * KIB, 9 * MIB + 512 * KIB, 8 * MIB + 512 * KIB,
        8 * MIB + 768 * KIB, 8 * MIB + 768 * KIB]
    assert _values(p["curve"], "reserved") == [22 * MIB] * 7
    assert p["curve"]["t"][::2] == [T0 + t for t in range(10, 17)]
    assert p["peak"] == {"bytes": 9 * MIB + 512 * KIB, "t": T0 + 12, "reserved_bytes": 22 * MIB}


def test_segments_and_blocks_at_the_peak(hand) -> None:
    seg = build_memory_snapshot(hand, "s.pickle")["segments"]
    assert seg["at"] == T0 + 12 and seg["position"] == 2
    assert seg["reserved_bytes"] == 22 * MIB and seg["allocated_bytes"] == 9 * MIB + 512 * KIB
    assert seg["free_bytes"] == 12 * MIB + 512 * KIB
    assert seg["largest_free_bytes"] == 12 * MIB  # the rest of P's segment
    assert [(r["address"], r["size"], r["allocated_bytes"], r["largest_free_bytes"])
            for r in seg["rows"]] == [(PRE, 20 * MIB, 8 * MIB, 12 * MIB),
                                      (SEG, 2 * MIB, MIB + 512 * KIB, 512 * KIB)]
    assert seg["rows"][1]["blocks"] == [
        {"offset": 0, "size": MIB, "frame": "make_a (train.py:10)"},
        {"offset": MIB, "size": 512 * KIB, "frame": "make_b (train.py:10)"}]


def test_segments_at_other_instants(hand) -> None:
    before = build_memory_snapshot(hand, "s.pickle", at=T0 + 5)["segments"]
    assert before["position"] == -1 and before["at"] is None
    assert [r["address"] for r in before["rows"]] == [PRE]  # S did not exist yet
    assert before["allocated_bytes"] == 8 * MIB
    after_reuse = build_memory_snapshot(hand, "s.pickle", at=T0 + 15)["segments"]
    assert after_reuse["rows"][1]["blocks"] == [
        {"offset": 0, "size": 256 * KIB, "frame": "make_c (train.py:10)"},
        {"offset": MIB, "size": 512 * KIB, "frame": "make_b (train.py:10)"}]
    assert after_reuse["rows"][1]["largest_free_bytes"] == 768 * KIB  # the hole A left


def test_top_allocations_at_the_peak_with_their_stacks(hand) -> None:
    top = build_memory_snapshot(hand, "s.pickle")["top_allocations"]
    assert [(a["address"], a["size"], a["alloc_t"], a["free_t"]) for a in top] == [
        (PRE, 8 * MIB, None, None), (SEG, MIB, T0 + 11, T0 + 14),
        (SEG + MIB, 512 * KIB, T0 + 12, None)]
    assert [f["name"] for f in top[1]["frames"]] == [
        "c10::cuda::CUDACachingAllocator::malloc", "forward", "make_a", "step"]
    assert top[1]["frames"][2] == {"filename": "/home/me/train.py", "line": 10,
                                   "name": "make_a"}


def test_ooms_and_devices(hand) -> None:
    p = build_memory_snapshot(hand, "s.pickle")
    assert p["ooms"] == [{"t": T0 + 16, "bytes": 64 * MIB, "device_free": 3 * MIB}]
    assert p["devices"] == ["GPU0"]
    with pytest.raises(UnknownSnapshotDeviceError):
        build_memory_snapshot(hand, "s.pickle", device="GPU3")


def test_on_the_trace_clock_when_the_trace_covers_the_same_period(tmp_path: Path, hand) -> None:
    base_ns = (T0 + 5) * 1000  # trace ts 0 is the snapshot's time T0 + 5
    events = [{"ph": "X", "cat": "cpu_op", "name": f"ProfilerStep#{i}", "pid": 1, "tid": 1,
               "ts": 4 * i, "dur": 4} for i in range(1, 4)]
    table = make_table(events, tmp_path, baseTimeNanoseconds=base_ns)
    p = build_memory_snapshot(hand, "s.pickle", table)
    assert p["clock"] == "trace" and p["base_time_ns"] == base_ns
    assert p["curve"]["t"][::2] == [5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0]
    assert p["peak"]["t"] == 7.0
    assert [s["name"] for s in p["steps"]] == ["1", "2", "3"]
    far = make_table(events, tmp_path, baseTimeNanoseconds=base_ns + 10**12)
    p = build_memory_snapshot(hand, "s.pickle", far)
    assert p["clock"] == "snapshot" and p["steps"] == []
    assert any("does not overlap" in m for m in p["messages"])


def test_a_snapshot_without_times_is_drawn_over_entry_numbers() -> None:
    data = hand_snapshot()
    for e in data["device_traces"][0]:
        del e["time_us"]
    p = build_memory_snapshot(to_columns(data), "old.pickle")
    assert p["clock"] == "entry" and p["curve"]["t"][::2] == [0, 1, 2, 3, 4, 5, 6]
    assert p["peak"]["t"] == 2
    assert any("no times" in m for m in p["messages"])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_against_the_simulated_allocators_ground_truth(seed: int) -> None:
    sim = Simulated(seed)
    snap = to_columns(sim.snapshot())
    n = len(sim.trace)
    p = build_memory_snapshot(snap, "sim.pickle", None, max_points=4 * n)
    assert _values(p["curve"], "allocated") == sim.allocated
    assert _values(p["curve"], "reserved") == sim.reserved
    assert p["peak"]["bytes"] == max(sim.allocated)
    rng = np.random.default_rng(seed)
    for position in [-1, *rng.integers(0, n, 12).tolist(), n - 1]:
        at = T0 - 1 if position < 0 else p["curve"]["t"][2 * position]
        seg = build_memory_snapshot(snap, "sim.pickle", at=at)["segments"]
        live = sim.pre if position < 0 else sim.live[position]
        blocks = {r["address"] + b["offset"]: b["size"] for r in seg["rows"]
                  for b in r["blocks"]}
        assert blocks == live
        assert seg["allocated_bytes"] == sum(live.values())
        reserved = sim.pre_reserved if position < 0 else sim.reserved[position]
        assert seg["reserved_bytes"] == reserved
    peak_at = int(np.argmax(sim.allocated))
    truth = sorted(sim.live[peak_at].values(), reverse=True)[:20]
    assert [a["size"] for a in p["top_allocations"]] == truth


def test_a_front_cut_trace_still_adds_up() -> None:
    """`max_entries` drops the oldest entries: frees of allocations the trace no longer holds
    start before it, and the curve is still anchored at the dump."""
    sim = Simulated(7)
    data = sim.snapshot()
    cut = 60
    data["device_traces"][0] = data["device_traces"][0][cut:]
    p = build_memory_snapshot(to_columns(data), "cut.pickle", max_points=10_000)
    assert _values(p["curve"], "allocated") == sim.allocated[cut:]
    assert _values(p["curve"], "reserved") == sim.reserved[cut:]


def test_level_of_detail_keeps_the_peak_and_ranges_start_with_the_value_in_force() -> None:
    sim = Simulated(4, operations=3000)
    snap = to_columns(sim.snapshot())
    p = build_memory_snapshot(snap, "sim.pickle", max_points=200)
    assert len(p["curve"]["t"]) <= 200
    assert max(p["curve"]["allocated"]) == max(sim.allocated)
    times = build_memory_snapshot(snap, "s", max_points=10**6)["curve"]["t"][::2]
    lo, hi = times[100], times[200]
    zoom = build_memory_snapshot(snap, "sim.pickle", start=lo + 0.5, end=hi)["curve"]
    assert zoom["t"][0] == lo + 0.5 and zoom["allocated"][0] == sim.allocated[100]
    assert zoom["t"][-1] == hi and zoom["allocated"][-1] == sim.allocated[200]


def test_of_several_snapshots_a_span_gets_the_one_of_its_period(tmp_path: Path) -> None:
    traces = sorted(SAMPLES.glob("cnn_bs32/*.pt.trace.json.gz"))
    need_shipped(len(traces) >= 2, "samples/cnn_bs32's two traces")
    first = write(tmp_path / "a.pickle", into_trace_period(hand_snapshot(), traces[1]))
    second = write(tmp_path / "b.pickle", into_trace_period(hand_snapshot(), traces[0]))
    evil = tmp_path / "evil.pickle"
    evil.write_bytes(evil_pickles(tmp_path / "pwned")["reduce-protocol-4"])
    names = ["a.pickle", "b.pickle", "evil.pickle"]
    for trace, expected in ((traces[0], "b.pickle"), (traces[1], "a.pickle")):
        table = load_trace(trace, use_cache=False)
        p = build_view(table, "memory_snapshot", ([evil, first, second], names))
        assert p["name"] == expected and p["clock"] == "trace" and p["snapshots"] == names
    with pytest.raises(Unreadable, match="evil.pickle: refused"):
        build_view(None, "memory_snapshot", ([evil], names))
    assert not (tmp_path / "pwned").exists()


def test_a_dump_without_entries_has_empty_curves_and_the_dump_as_peak() -> None:
    # no recorded history: the curve is empty, the extent unknown, the peak is what the dump
    # holds (P 8 MiB + C 256 KiB + B 512 KiB allocated, 20 + 2 MiB reserved) at no time
    data = hand_snapshot()
    data["device_traces"] = [[]]
    p = build_memory_snapshot(to_columns(data), "dump.pickle")
    assert p["entries"] == 0 and p["clock"] == "entry" and p["device"] == "GPU0"
    assert p["curve"] == {"t": [], "allocated": [], "reserved": []}
    assert p["extent"] == [None, None]
    assert p["peak"] == {"bytes": 8 * MIB + 768 * KIB, "t": None, "reserved_bytes": 22 * MIB}
    assert p["ooms"] == [] and p["steps"] == []
    assert not any("no times" in m for m in p["messages"])


def test_x_values_are_floats_on_every_clock(hand) -> None:
    data = hand_snapshot()
    for e in data["device_traces"][0]:
        del e["time_us"]
    for snap in (hand, to_columns(data)):
        p = build_memory_snapshot(snap, "s.pickle")
        xs = [*p["extent"], *p["curve"]["t"], p["peak"]["t"], p["segments"]["at"]]
        assert all(type(v) is float for v in xs), xs


def test_overlaps_trace_at_both_ends(tmp_path: Path, hand) -> None:
    # the hand snapshot's entries are at T0 + 10 ... T0 + 16 us; the trace covers [0, 4] us
    events = [{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 0, "dur": 4}]

    def at(base_us: int) -> bool:
        table = make_table(events, tmp_path, baseTimeNanoseconds=base_us * 1000)
        return overlaps_trace(hand, table)

    assert at(T0 + 16)       # the last entry at trace time 0: the trace's start
    assert not at(T0 + 17)   # the last entry 1 us before it
    assert at(T0 + 6)        # the first entry at trace time 4: the trace's end
    assert not at(T0 + 5)    # the first entry 1 us after it
    data = hand_snapshot()
    for e in data["device_traces"][0]:
        del e["time_us"]
    assert not overlaps_trace(to_columns(data), make_table(events, tmp_path,
                                                           baseTimeNanoseconds=(T0 + 10) * 1000))
    empty = make_table([], tmp_path, baseTimeNanoseconds=(T0 + 10) * 1000)
    assert not overlaps_trace(hand, empty)


def test_a_dump_holding_less_than_the_history_lifts_the_curve_to_zero() -> None:
    # the dump says nothing is allocated, yet the history ends 768 KiB up: the anchored curve
    # would start at -768 KiB; lifted, it is the running sum of the history from 0
    data = hand_snapshot()
    for segment in data["segments"]:
        for block in segment["blocks"]:
            block["state"] = "inactive"
    p = build_memory_snapshot(to_columns(data), "s.pickle")
    assert _values(p["curve"], "allocated") == [
        0, MIB, MIB + 512 * KIB, MIB + 512 * KIB, 512 * KIB, 768 * KIB, 768 * KIB]
    assert p["peak"] == {"bytes": MIB + 512 * KIB, "t": T0 + 12, "reserved_bytes": 22 * MIB}
    assert p["messages"] == ["The trace and the dump disagree (allocated memory would go below "
                             "zero): the curve is lifted to start at zero."]


def test_segment_and_block_caps_keep_the_largest(hand, monkeypatch) -> None:
    # at the peak: P 8 MiB in PRE (20 MiB); A 1 MiB and B 512 KiB in SEG (2 MiB)
    full = build_memory_snapshot(hand, "s.pickle")["segments"]
    assert not full["truncated"] and (full["segment_count"], full["block_count"]) == (2, 3)
    monkeypatch.setattr(snapshot_state, "MAX_BLOCKS", 3)
    assert not build_memory_snapshot(hand, "s.pickle")["segments"]["truncated"]  # at the cap
    monkeypatch.setattr(snapshot_state, "MAX_BLOCKS", 2)
    capped = build_memory_snapshot(hand, "s.pickle")["segments"]
    assert capped["truncated"] and capped["block_count"] == 3
    assert [[b["size"] for b in r["blocks"]] for r in capped["rows"]] == [[8 * MIB], [MIB]]
    assert capped["allocated_bytes"] == 9 * MIB + 512 * KIB  # totals still count every block
    assert [r["allocated_bytes"] for r in capped["rows"]] == [8 * MIB, MIB + 512 * KIB]
    monkeypatch.setattr(snapshot_state, "MAX_BLOCKS", 100)
    monkeypatch.setattr(snapshot_state, "MAX_SEGMENTS", 1)
    one = build_memory_snapshot(hand, "s.pickle")["segments"]
    assert one["truncated"] and one["segment_count"] == 2
    assert [r["address"] for r in one["rows"]] == [PRE]  # the larger segment
    assert one["reserved_bytes"] == 22 * MIB


def test_an_empty_snapshot_has_no_segment_rows() -> None:
    data = hand_snapshot()
    data["segments"] = []
    data["device_traces"] = [[]]
    seg = build_memory_snapshot(to_columns(data), "s.pickle")["segments"]
    assert (seg["rows"], seg["reserved_bytes"], seg["largest_free_bytes"]) == ([], 0, 0)
    assert (seg["segment_count"], seg["block_count"], seg["truncated"]) == (0, 0, False)


def test_block_labels_skip_framework_frames_or_fall_back_to_the_first() -> None:
    internal = [{"filename": "??", "line": 0, "name": "c10::cuda::CUDACachingAllocator::malloc"},
                {"filename": "C:\\py\\Lib\\torch\\nn\\x.py", "line": 3, "name": "fwd"},
                {"filename": "<frozen runpy>", "line": 1, "name": "run"}]
    user = [*internal, {"filename": "/home/me/run.py", "line": 5, "name": "main"}]

    def label_of_c(stack: list) -> str:
        data = hand_snapshot()
        data["device_traces"][0][5]["frames"] = stack  # alloc C at t = 15
        data["segments"][1]["blocks"][0]["frames"] = stack
        seg = build_memory_snapshot(to_columns(data), "s.pickle", at=T0 + 15)["segments"]
        return seg["rows"][1]["blocks"][0]["frame"]

    assert label_of_c(user) == "main (run.py:5)"
    assert label_of_c(internal) == "c10::cuda::CUDACachingAllocator::malloc (??:0)"


def test_ooms_in_order_capped_and_without_device_free(monkeypatch) -> None:
    data = hand_snapshot()
    data["device_traces"][0].append(entry("oom", 0, 32 * MIB, 17))  # no device_free recorded
    snap = to_columns(data)
    assert build_memory_snapshot(snap, "s.pickle")["ooms"] == [
        {"t": T0 + 16, "bytes": 64 * MIB, "device_free": 3 * MIB},
        {"t": T0 + 17, "bytes": 32 * MIB, "device_free": None}]
    monkeypatch.setattr(snapshot_module, "MAX_OOMS", 1)
    assert [o["t"] for o in build_memory_snapshot(snap, "s.pickle")["ooms"]] == [T0 + 16]
