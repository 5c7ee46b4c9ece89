"""Benchmark of the LOD `timeline` view on ~800 MB traces.

    .venv/bin/python bench/timeline_bench.py [--positions 8] [--width 4000] [--no-gpu]

Traces:
* `800mb`: the benchmark's recorded CPU trace (bench/_work/traces/800mb/*.pt.trace.json, from
  bench/run.py). If absent, one is built like the GPU one below from the largest recorded trace.
* `gpu-800mb`: a GPU trace with launch flows and counters, built once into
  bench/_work/timeline/ by replicating a real recorded trace (default
  ../shared/traces/ns_resolution: 2 CPU threads, a GPU stream, ac2g + fwdbwd flows) with shifted
  timestamps, ids and step numbers, until it reaches ~800 MB.

For each trace: index build time (and the first request, which also computes steps and GPU
metrics), then `build_timeline` at `--width` px over zoom levels from the whole trace down to
10 us, at random positions (window centres on random events, so windows hold data): p50/p95
latency of build + JSON encoding (msgspec, as the server does) and the JSON / gzip bytes. The
old plugin's `/trace` answer for the same file is the whole raw trace gzipped at level 1 (spec
1.4; torch_tb_profiler/plugin.py), timed here too. Writes bench/timeline_results.md.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import platform
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
WORK = BENCH / "_work" / "timeline"
RECORDED = BENCH / "_work" / "traces"
SHARED = REPO.parent / "shared" / "traces"
RESULTS = BENCH / "timeline_results.md"
TARGET_BYTES = 800 * 1024 * 1024
ZOOMS_US = [None, 1e6, 1e5, 1e4, 1e3, 1e2, 10.0]  # None: the whole trace
MS = 1000.0

sys.path.insert(0, str(REPO))
os.environ.setdefault("TORCH_PROF_CACHE_DIR", str(WORK / "cache"))

from tb_plugin.analysis.timeline.view import build_timeline, build_timeline_index  # noqa: E402
from tb_plugin.load import load_trace  # noqa: E402

_ID_KEYS = ("External id", "external id", "correlation", "Ev Idx", "Record function id")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# ----------------------------------------------------------------------------------------------
# Traces


def recorded_800mb() -> Path | None:
    found = sorted((RECORDED / "800mb").glob("*.pt.trace.json"))
    return found[0] if found else None


def replicated(base: Path, name: str) -> Path:
    """`base` repeated with shifted times/ids until ~TARGET_BYTES; built once."""
    out = WORK / name / f"replicated.{base.name.split('.')[0]}.pt.trace.json"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    log(f"building {out} from {base}")
    opener = gzip.open if base.suffix == ".gz" else open
    with opener(base, "rb") as handle:
        document = json.load(handle)
    events = document.pop("traceEvents")
    head = [e for e in events if e.get("ph") == "M"]
    body = [
        e
        for e in events
        if e.get("ph") != "M"
        and e.get("cat") != "Trace"
        and e.get("pid") not in ("Spans", "Traces", "")
    ]
    ts = [e["ts"] for e in body if isinstance(e.get("ts"), (int, float))]
    period = max(ts) - min(ts) + 1000.0
    id_shift = 1 + max([_ids(e) for e in body] + [0])
    steps = 1 + max([_step_number(e.get("name")) for e in body] + [0])
    copy_bytes = len(msgspec.json.encode(body))
    copies = max(1, math.ceil(TARGET_BYTES / copy_bytes))
    tmp = out.with_suffix(".partial")
    header = msgspec.json.encode(document)[:-1]
    parts = (
        head,
        *([_shifted(e, k * period, k * id_shift, k * steps) for e in body] for k in range(copies)),
    )  # lazily, one copy at a time
    with open(tmp, "wb") as handle:
        handle.write(header + (b", " if header != b"{" else b"") + b'"traceEvents": [')
        separator = b""
        for part in parts:
            if part:
                handle.write(separator + msgspec.json.encode(part)[1:-1])
                separator = b", "
        handle.write(b"]}")
    tmp.rename(out)
    log(f"  {copies} copies, {out.stat().st_size / 2**20:.0f} MiB")
    return out


def _ids(event: dict[str, Any]) -> int:
    args = event.get("args") or {}
    values = [args.get(k) for k in _ID_KEYS] + [event.get("id")]
    return int(max((v for v in values if isinstance(v, (int, float))), default=0))


def _step_number(name: Any) -> int:
    if isinstance(name, str) and name.startswith("ProfilerStep#") and name[13:].isdigit():
        return int(name[13:])
    return 0


def _shifted(event: dict[str, Any], dt: float, did: int, dstep: int) -> dict[str, Any]:
    if not (dt or did or dstep):
        return event
    out = dict(event)
    if isinstance(out.get("ts"), (int, float)):
        out["ts"] = out["ts"] + dt
    if isinstance(out.get("id"), (int, float)):
        out["id"] = out["id"] + did
    step = _step_number(out.get("name"))
    if step:
        out["name"] = f"ProfilerStep#{step + dstep}"
    args = out.get("args")
    if args:
        out["args"] = {
            k: v + did if k in _ID_KEYS and isinstance(v, (int, float)) else v
            for k, v in args.items()
        }
    return out


# ----------------------------------------------------------------------------------------------
# Measurements


def old_trace_payload(path: Path) -> tuple[int, float]:
    """Bytes and seconds of the old /trace body: the raw file gzipped at level 1."""
    start = time.perf_counter()
    packer = zlib.compressobj(1, zlib.DEFLATED, 31)  # 31: gzip container
    size = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(16 << 20):
            size += len(packer.compress(chunk))
    size += len(packer.flush())
    return size, time.perf_counter() - start


def windows(index: Any, rng: np.random.Generator, positions: int) -> list[tuple[str, Any]]:
    """(label, (start, end) or None) per request: whole trace, then centred on random events."""
    lo, hi = float(index.us(0)), float(index.us(index.end_tick))
    starts = index.us(index.starts(rng.integers(0, index.event.size, positions * len(ZOOMS_US))))
    out: list[tuple[str, Any]] = []
    k = 0
    for span in ZOOMS_US:
        if span is None:
            out += [("whole", None)] * positions
            continue
        if span >= hi - lo:
            continue
        for _ in range(positions):
            a = min(max(float(starts[k]) - span / 2, lo), hi - span)
            out.append((_label(span), (a, a + span)))
            k += 1
    return out


def _label(span_us: float) -> str:
    return (
        f"{span_us / 1e6:g} s"
        if span_us >= 1e6
        else (f"{span_us / 1e3:g} ms" if span_us >= 1e3 else f"{span_us:g} us")
    )


def measure(path: Path, positions: int, width: int) -> dict[str, Any]:
    log(f"loading {path} ({path.stat().st_size / 2**20:.0f} MiB)")
    start = time.perf_counter()
    table = load_trace(str(path))
    result: dict[str, Any] = {
        "trace": str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path),
        "mib": path.stat().st_size / 2**20,
        "events": len(table.events),
        "flows": len(table.flows),
        "memory": len(table.memory),
        "load_s": time.perf_counter() - start,
    }
    table.derived.clear()
    start = time.perf_counter()
    index = build_timeline_index(table)
    result["index_s"] = time.perf_counter() - start
    result["index_mib"] = _index_bytes(index) / 2**20
    result.update(
        tracks=len(index.tracks),
        rows=index.n_rows,
        clamped=index.clamped,
        levels=len(index.levels),
        flow_pairs=int(index.flows["lo"].size),
    )
    start = time.perf_counter()
    first = build_timeline(table, width=width)
    result["first_request_s"] = time.perf_counter() - start
    result["counters"] = [c["name"] for c in first["counters"]]
    result["rss_mib"] = _rss_mib()
    rng = np.random.default_rng(0)
    per_zoom: dict[str, list[dict[str, float]]] = {}
    for label, window in windows(index, rng, positions):
        per_zoom.setdefault(label, []).append(_request(table, window, width))
    result["zooms"] = {label: _summary(samples) for label, samples in per_zoom.items()}
    log("old /trace payload: gzip -1 of the raw file")
    result["old_trace_bytes"], result["old_trace_s"] = old_trace_payload(path)
    return result


def _request(table: Any, window: Any, width: int) -> dict[str, float]:
    start = time.perf_counter()
    if window is None:
        payload = build_timeline(table, width=width)
    else:
        payload = build_timeline(table, start_us=window[0], end_us=window[1], width=width)
    built = time.perf_counter()
    body = msgspec.json.encode(payload)
    encoded = time.perf_counter()
    return {
        "build_ms": (built - start) * MS,
        "total_ms": (encoded - start) * MS,
        "bytes": len(body),
        "gzip_bytes": len(gzip.compress(body, 6, mtime=0)),
        "events": payload["stats"]["events"],
        "items": payload["stats"]["shown"] + payload["stats"]["blocks"],
        "merge_px": payload["merge_px"],
        "flows_capped": payload["flows"]["capped"],
    }


def _summary(samples: list[dict[str, float]]) -> dict[str, float]:
    total = np.array([s["total_ms"] for s in samples])
    size = np.array([s["bytes"] for s in samples])
    return {
        "n": len(samples),
        "p50_ms": float(np.percentile(total, 50)),
        "p95_ms": float(np.percentile(total, 95)),
        "max_ms": float(total.max()),
        "build_p50_ms": float(np.percentile([s["build_ms"] for s in samples], 50)),
        "p50_bytes": float(np.percentile(size, 50)),
        "max_bytes": float(size.max()),
        "max_gzip_bytes": float(max(s["gzip_bytes"] for s in samples)),
        "events_p50": float(np.percentile([s["events"] for s in samples], 50)),
        "items_max": float(max(s["items"] for s in samples)),
        "merge_px_max": float(max(s["merge_px"] for s in samples)),
    }


def _rss_mib() -> float:
    """Current resident set (table + index + interpreter)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _index_bytes(index: Any) -> int:
    arrays = [
        index.row_track,
        index.row_depth,
        index.row_offsets,
        index.track_rows,
        index.start_key,
        index.end_key,
        index.gap,
        index.event,
        index.name,
        index.position,
    ]
    arrays += [first for _, first in index.levels] + list(index.flows.values())
    return sum(a.nbytes for a in arrays)


# ----------------------------------------------------------------------------------------------
# Report


def table_lines(name: str, r: dict[str, Any], width: int) -> list[str]:
    lines = [
        f"### {name}: {r['trace']}",
        "",
        f"{r['mib']:.0f} MiB, {r['events']:,} events, {r['flows']:,} flow events, "
        f"{r['memory']:,} memory events; {r['tracks']} tracks, {r['rows']} rows, "
        f"{r['flow_pairs']:,} flow pairs, {r['clamped']} overlaps clamped, "
        f"{r['levels']} merge levels. Counters: {', '.join(r['counters']) or 'none'}.",
        "",
        f"- load (parse or cache): {r['load_s']:.1f} s; **index build: {r['index_s']:.2f} s** "
        f"({r['index_mib']:.0f} MiB of arrays); first request (+ steps, GPU metrics): "
        f"{r['first_request_s'] * MS:.0f} ms; RSS with table + index {r['rss_mib']:.0f} MiB",
        f"- old plugin `/trace` (whole raw trace, gzip -1): "
        f"**{r['old_trace_bytes'] / 2**20:.0f} MiB** to send, {r['old_trace_s']:.1f} s to "
        "compress, then the browser parses the whole JSON",
        "",
        f"| window (width {width}) | n | p50 ms | p95 ms | max ms | JSON p50 KB | JSON max KB "
        "| gzip max KB | events in window (p50) | items max | merge px max |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, z in r["zooms"].items():
        lines.append(
            f"| {label} | {z['n']} | {z['p50_ms']:.1f} | {z['p95_ms']:.1f} | {z['max_ms']:.1f} "
            f"| {z['p50_bytes'] / 1e3:.0f} | {z['max_bytes'] / 1e3:.0f} "
            f"| {z['max_gzip_bytes'] / 1e3:.0f} | {z['events_p50']:,.0f} | {z['items_max']:.0f} "
            f"| {z['merge_px_max']:g} |"
        )
    return lines + [""]


def write_report(results: dict[str, dict[str, Any]], width: int) -> str:
    worst_ms = max(z["p95_ms"] for r in results.values() for z in r["zooms"].values())
    worst_kb = max(z["max_bytes"] for r in results.values() for z in r["zooms"].values()) / 1e3
    lines = [
        "# Timeline (LOD) benchmark",
        "",
        f"`.venv/bin/python bench/timeline_bench.py` on {time.strftime('%Y-%m-%d')}, "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f} at the end "
        "(a machine shared with other jobs). Latency = `build_timeline` + msgspec JSON encoding "
        "(what the server does before gzip), single thread, warm index. `gpu-800mb` is a real "
        "GPU trace (../shared/traces/ns_resolution) replicated with shifted times and ids.",
        "",
        f"Targets: <= 150 ms and <= 1 MB of JSON per request at any zoom. Worst p95: "
        f"**{worst_ms:.1f} ms**; largest payload: **{worst_kb:.0f} KB**.",
        "",
    ]
    for name, r in results.items():
        lines += table_lines(name, r, width)
    text = "\n".join(lines)
    RESULTS.write_text(text)
    (WORK / "results.json").write_text(json.dumps(results, indent=1))
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=8, help="random windows per zoom")
    parser.add_argument("--width", type=int, default=4000)
    parser.add_argument("--no-gpu", action="store_true", help="skip the replicated GPU trace")
    parser.add_argument(
        "--gpu-base",
        type=Path,
        default=SHARED / "ns_resolution" / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    )
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    traces = {"800mb": recorded_800mb()}
    if traces["800mb"] is None:
        base = max(RECORDED.glob("*/*.pt.trace.json"), key=lambda p: p.stat().st_size)
        traces["800mb"] = replicated(base, "800mb")
    if not args.no_gpu and args.gpu_base.exists():
        traces["gpu-800mb"] = replicated(args.gpu_base, "gpu-800mb")
    results = {}
    for name, path in traces.items():  # one trace in memory at a time
        results[name] = measure(path, args.positions, args.width)
    print(write_report(results, args.width))


if __name__ == "__main__":
    main()
