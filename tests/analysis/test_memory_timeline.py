"""Memory timeline from parsed `export_memory_timeline` raw exports: stacked categories, leak
flags, and the real exports (reading the files is tested in tests/ingest/test_memory_export.py)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np

from tb_plugin.analysis.memory import timeline as mt
from tb_plugin.discovery import discover_runs
from tb_plugin.ingest.memory_export import CATEGORIES, RawTimeline, read_raw_timeline
from tb_plugin.load import load_trace
from tests.support import SAMPLES, SHARED_TRACES, needs_shared

REAL = SHARED_TRACES / "memory_timeline_raw" / "memory_timeline.raw.json.gz"
CNN = SAMPLES / "cnn_bs32"

P, OPT, IN, TMP, ACT, GRAD, AUTO, UNK = range(8)  # category indices
PRE, CREATE, INC, DESTROY = 1, 2, 3, 4

RECORDS = [
    [-1, PRE, 1000, P],  # a weight, before profiling
    [-1, PRE, 24, UNK],
    [10_000, CREATE, 400, ACT],
    [10_000, CREATE, 100, TMP],
    [12_000, DESTROY, -100, TMP],
    [15_000, INC, -400, ACT],  # the activation becomes a gradient
    [15_000, INC, 400, GRAD],
    [20_000, CREATE, 64, IN],
    [21_000, DESTROY, -64, IN],
]


def _write(path: Path, records: object) -> Path:
    path.write_bytes(gzip.compress(json.dumps(records).encode()))
    return path


def _raw(path: Path, records: object) -> RawTimeline:
    return read_raw_timeline(_write(path, records))


def test_stacked_timeline(tmp_path: Path) -> None:
    payload = mt.build_memory_timeline(_raw(tmp_path / "m.raw.json.gz", RECORDS))
    assert payload["categories"] == list(CATEGORIES)
    assert payload["records"] == len(RECORDS) and payload["skipped"] == 0
    # pre-existing records sit at the first real timestamp (10 us), with its creations
    assert payload["t_us"] == [10.0, 12.0, 15.0, 20.0, 21.0]
    series = payload["series"]
    assert series["PARAMETER"] == [1000] * 5
    assert series["UNKNOWN"] == [24] * 5
    assert series["ACTIVATION"] == [400, 400, 0, 0, 0]
    assert series["GRADIENT"] == [0, 0, 400, 400, 400]
    assert series["TEMPORARY"] == [100, 0, 0, 0, 0]
    assert series["INPUT"] == [0, 0, 0, 64, 0]
    assert payload["total"] == [1524, 1424, 1424, 1488, 1424]
    assert payload["peak"] == {"bytes": 1524, "t_us": 10.0}
    json.dumps(payload)


def test_totals_equal_the_sum_of_categories(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    records, live = [], []
    for t in range(20_000):
        if live and rng.random() < 0.45:
            size, cat = live.pop(int(rng.integers(len(live))))
            records.append([t * 1000, DESTROY, -size, cat])
        else:
            size, cat = int(rng.integers(1, 1 << 20)), int(rng.integers(0, 8))
            live.append((size, cat))
            records.append([t * 1000, CREATE, size, cat])
    payload = mt.build_memory_timeline(_raw(tmp_path / "r.raw.json.gz", records),
                                       max_points=300)
    assert len(payload["t_us"]) <= 300
    stacked = np.sum([payload["series"][c] for c in CATEGORIES], axis=0)
    assert stacked.tolist() == payload["total"]
    exact = np.cumsum([r[2] for r in records])
    assert payload["peak"]["bytes"] == int(exact.max()) == max(payload["total"])


def test_empty_export(tmp_path: Path) -> None:
    payload = mt.build_memory_timeline(_raw(tmp_path / "e.raw.json.gz", []))
    assert payload["records"] == 0 and payload["skipped"] == 0
    assert payload["t_us"] == [] and payload["peak"] is None and payload["leaks"] == []


def test_growth_flag_needs_steps_and_ignores_what_is_alive_at_the_end(tmp_path: Path) -> None:
    mib = 1 << 20
    records = [[-1, PRE, 10 * mib, P]]
    for step in range(4):  # per step: a temporary freed, and 2 MiB of activations kept
        t = (step + 1) * 1_000_000
        records += [[t, CREATE, mib, TMP], [t + 100, DESTROY, -mib, TMP],
                    [t + 200, CREATE, 2 * mib, ACT]]
    raw = _raw(tmp_path / "g.raw.json.gz", records)
    ends = np.array([(s + 1) * 1000 + 500 for s in range(4)], dtype=float)  # us
    leaks = mt.build_memory_timeline(raw, step_ends_us=ends,
                                     step_names=["1", "2", "3", "4"])["leaks"]
    # hand-derived: 10 MiB of weights + 2 MiB kept per step; noise max(16 KiB, 0.5% of 18 MiB)
    assert leaks == [{"kind": "growth", "basis": "steps", "steps": ["1", "2", "3", "4"],
                      "allocated_at_step_end": [12 * mib, 14 * mib, 16 * mib, 18 * mib],
                      "growth_bytes": 6 * mib, "per_step_bytes": 2 * mib,
                      "noise_bytes": int(0.005 * 18 * mib)}]
    # no steps, no flag: activations alive at the end are not a leak by themselves
    assert mt.build_memory_timeline(raw)["leaks"] == []
    # step ends without names: the steps are numbered from 0
    unnamed = mt.build_memory_timeline(raw, step_ends_us=ends)["leaks"]
    assert [flag["steps"] for flag in unnamed] == [["0", "1", "2", "3"]]
    assert unnamed[0]["allocated_at_step_end"] == leaks[0]["allocated_at_step_end"]


def test_memory_alive_at_the_end_is_not_a_leak(tmp_path: Path) -> None:
    records = [[1000, CREATE, 5 << 20, GRAD], [2000, CREATE, 5 << 20, OPT],
               [3000, CREATE, 100, TMP], [4000, DESTROY, -100, TMP],
               [5000, CREATE, 3 << 20, ACT]]
    raw = _raw(tmp_path / "x.raw.json.gz", records)
    ends = np.array([1.5, 2.5, 3.5, 5.5])  # us: the level rises, but only once beyond noise
    assert mt.build_memory_timeline(raw, step_ends_us=ends)["leaks"] == []
    assert mt.build_memory_timeline(raw)["leaks"] == []


@needs_shared
def test_real_export() -> None:
    payload = mt.build_memory_timeline(read_raw_timeline(REAL))
    assert payload["records"] == 16845 and payload["skipped"] == 0
    assert 100 < len(payload["t_us"]) <= mt.DEFAULT_MAX_POINTS
    assert np.all(np.diff(payload["t_us"]) > 0)
    stacked = np.sum([payload["series"][c] for c in CATEGORIES], axis=0)
    assert stacked.tolist() == payload["total"]
    assert payload["peak"]["bytes"] == max(payload["total"]) == 3082832104
    assert payload["series"]["PARAMETER"][-1] == 102440608
    assert min(min(v) for v in payload["series"].values()) >= 0


def test_sample_export_on_the_trace_clock() -> None:
    run = next(r for r in discover_runs(str(SAMPLES)) if r.name == "cnn_bs32")
    assert run.memory_timelines
    span = run.workers[next(iter(run.workers))][0]
    table = load_trace(str(CNN / span.ref.name), use_cache=False)
    ref = span.memory_timeline
    assert ref is not None and ref.name.split(".")[1] == span.ref.name.split(".")[1]
    payload = mt.build_memory_timeline_for(table, read_raw_timeline(ref))
    assert payload["records"] > 100 and payload["skipped"] == 0
    start, end = table.events["ts"].min(), (table.events["ts"] + table.events["dur"]).max()
    assert start - 1000 <= payload["t_us"][0] and payload["t_us"][-1] <= end + 1000
    stacked = np.sum([payload["series"][c] for c in CATEGORIES], axis=0)
    assert stacked.tolist() == payload["total"]
