"""Parse speed on real recorded traces, beside the machine's limit, and where the time goes.

    python bench/parse_bench.py [--cache /tmp/parse-bench] [--sizes 50,200,800] [--repeats 3]

Traces (kept in the cache folder, outside the repository):
- `cnn_<N>mb`: recorded by bench/parse_record.py with our recorder (shapes, stacks, memory;
  torch CPU), gzip'd as the recorder writes them; recorded first if missing;
- `gpu_<N>mb`: a GPU-style trace, the shared H100 trace `tl_h100_qwen_mem_modules` (kernels,
  launches, memory, python stacks) repeated until it reaches N MB, each copy shifted in time
  and in its ids; plain JSON.

For each trace, in one run, each measurement a fresh process (bench/parse_child.py), median of
`--repeats`:
- skip-scan: msgspec over the decompressed JSON with every field skipped (the floor);
- parse on one core: `load_trace(processes=1)`, MB per CPU second (the per-core speed) and its
  ratio to the skip-scan measured in the same run;
- parse on all cores: `load_trace()` (the split parse), wall, and the CPU its children used
  (0 means the split did not engage).
The machine is shared: CPU seconds inflate less than wall seconds with the load, and the ratio
to the skip-scan, measured alternately, cancels most of it; the load average is reported.

Where the time goes per field family: the 50 MB trace with one family taken out (python stacks
= `python_function` events, `[memory]` events, flows, shapes = `Input Dims`/`Input type`/
`Input Strides`/`Concrete Inputs`, all args, names made empty), each parsed on one core; the
family costs the difference. Then a sampling profile (py-spy when installed, else cProfile) of
the one-core parse of the 200 MB trace, by function. Last, TensorBoard's cold open to Overview
+ Operator (bench/cold_open.py) on the 800 MB trace.

Writes bench/parse_results.md and CACHE/parse_results.json.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional

import harness
import msgspec
from benchpaths import BENCH, MAIN_PYTHON, REPO, log
from cold_open import cold_ours

RESULTS = BENCH / "parse_results.md"
GPU_SOURCE = (REPO.parent / "shared" / "traces" / "tl_h100_qwen_mem_modules"
              / "worker0.pt.trace.json.gz")
SHAPE_KEYS = ("Input Dims", "Input dims", "Input type", "Input Strides", "Concrete Inputs")
FAMILIES: dict[str, Callable[[dict[str, Any]], Optional[dict[str, Any]]]] = {
    "python stacks (python_function events)":
        lambda e: None if e.get("cat") == "python_function" else e,
    "memory events ([memory] instants)": lambda e: None if e.get("name") == "[memory]" else e,
    "flows (s/f/t)": lambda e: None if e.get("ph") in ("s", "f", "t") else e,
    "shapes (Input Dims/type/Strides, Concrete Inputs)": lambda e: {
        **e, "args": {k: v for k, v in e["args"].items() if k not in SHAPE_KEYS}}
        if isinstance(e.get("args"), dict) else e,
    "all args": lambda e: {k: v for k, v in e.items() if k != "args"} if e.get("ph") != "M"
        else e,
    "names (made empty)": lambda e: {**e, "name": ""} if e.get("ph") != "M" else e,
}


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONPATH"] = str(REPO)
    return env


def measure(mode: str, trace: Path, processes: int = 1, timeout: float = 900) -> dict[str, Any]:
    cmd = [str(MAIN_PYTHON), str(BENCH / "parse_child.py"), mode, str(trace)]
    if mode == "parse":
        cmd.append(str(processes))
    return harness.run_child(cmd, _env(), f"parse-{mode}{processes}-{trace.parent.name}",
                             timeout)


def median_of(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(float(r[key]) for r in runs)


def one_trace(trace: Path, repeats: int, cores: int) -> dict[str, Any]:
    """Skip-scan, one-core parse and all-core parse, interleaved `repeats` times."""
    skip, one, split = [], [], []
    for _ in range(repeats):
        skip.append(measure("skip", trace))
        one.append(measure("parse", trace, 1))
        split.append(measure("parse", trace, cores))
    for run in skip + one + split:
        if run.get("status") != "ok":
            raise RuntimeError(f"{trace}: {run}")
    mb = one[0]["mb"]
    row = {
        "trace": trace.parent.name, "file": trace.name, "mb": mb, "events": one[0]["events"],
        "skip_cpu_s": median_of(skip, "cpu_s"),
        "one_cpu_s": median_of(one, "cpu_s"), "one_wall_s": median_of(one, "wall_s"),
        "split_wall_s": median_of(split, "wall_s"),
        "split_cpu_s": statistics.median(r["cpu_s"] + r["children_cpu_s"] for r in split),
        "split_children_cpu_s": median_of(split, "children_cpu_s"),
        "cores": cores,
        "load": [r["load_before"] for r in skip + one + split],
        "runs": {"skip": skip, "one": one, "split": split},
    }
    row["skip_mb_s"] = round(mb / row["skip_cpu_s"], 1)
    row["one_mb_s"] = round(mb / row["one_cpu_s"], 1)
    row["split_mb_s"] = round(mb / row["split_wall_s"], 1)
    row["ratio"] = round(row["skip_cpu_s"] / row["one_cpu_s"], 3)
    return row


# -- traces -------------------------------------------------------------------------------------


def recorded(cache: Path, sizes: list[int]) -> list[Path]:
    traces = cache / "traces"
    missing = [s for s in sizes if not any((traces / f"cnn_{s}mb").glob("*.pt.trace.json.gz"))]
    if missing:
        log(f"recording {missing} MB with the recorder (bench/parse_record.py)")
        subprocess.run([str(MAIN_PYTHON), str(BENCH / "parse_record.py"), "--out", str(traces),
                        "--mb", *map(str, missing)], check=True, env=_env(),
                       stdout=subprocess.DEVNULL)
    return [next((traces / f"cnn_{s}mb").glob("*.pt.trace.json.gz")) for s in sizes]


def gpu_scaled(cache: Path, mb: int) -> Path:
    """The shared H100 trace repeated to `mb` MB: copy k shifted by k spans and k id ranges."""
    out = cache / "traces" / f"gpu_{mb}mb" / "worker0.pt.trace.json"
    if out.exists():
        return out
    doc = json.loads(gzip.decompress(GPU_SOURCE.read_bytes()))
    events = doc.pop("traceEvents")
    meta = [e for e in events if e.get("ph") == "M"]
    timed = [e for e in events if e.get("ph") != "M"]
    stamps = [e["ts"] + e.get("dur", 0) for e in timed if isinstance(e.get("ts"), (int, float))]
    span = max(stamps) - min(stamps) + 1000.0
    ids = [v for e in timed for v in (e.get("id"), *(e.get("args") or {}).values())
           if isinstance(v, int) and not isinstance(v, bool)]
    stride = max(ids) + 1
    copies = max(1, round(mb * 1e6 / len(msgspec.json.encode(timed))))
    scaled = list(meta)
    for k in range(copies):
        for event in timed:
            scaled.append(_shifted(event, k * span, k * stride))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(msgspec.json.encode({**doc, "traceEvents": scaled}))
    return out


_ID_ARGS = ("External id", "external id", "correlation", "Python id", "Python parent id")


def _shifted(event: dict[str, Any], dt: float, did: int) -> dict[str, Any]:
    copy = dict(event)
    if isinstance(copy.get("ts"), (int, float)):
        copy["ts"] = copy["ts"] + dt
    if isinstance(copy.get("id"), int):
        copy["id"] += did
    args = copy.get("args")
    if isinstance(args, dict):
        copy["args"] = {k: v + did if k in _ID_ARGS and isinstance(v, int) and v >= 0 else v
                        for k, v in args.items()}
    return copy


def family_variants(cache: Path, trace: Path) -> dict[str, Path]:
    """The trace as plain JSON (re-encoded), and once per family with that family taken out."""
    folder = cache / "families"
    folder.mkdir(parents=True, exist_ok=True)
    doc = json.loads(gzip.decompress(trace.read_bytes()))
    variants = {"whole trace": doc["traceEvents"]}
    for family, keep in FAMILIES.items():
        variants[family] = [kept for e in doc["traceEvents"] if (kept := keep(e)) is not None]
    paths = {}
    for i, (family, events) in enumerate(variants.items()):
        path = folder / f"v{i}" / "worker0.pt.trace.json"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(msgspec.json.encode({**doc, "traceEvents": events}))
        paths[family] = path
    return paths


def families(cache: Path, trace: Path, repeats: int) -> list[dict[str, Any]]:
    rows = []
    paths = family_variants(cache, trace)
    for family, path in paths.items():
        runs = [measure("parse", path, 1) for _ in range(repeats)]
        rows.append({"family": family, "mb": runs[0]["mb"], "events": runs[0]["events"],
                     "cpu_s": median_of(runs, "cpu_s")})
    whole = rows[0]
    for row in rows[1:]:
        row["saved_cpu_s"] = round(whole["cpu_s"] - row["cpu_s"], 3)
        row["saved_share"] = round(row["saved_cpu_s"] / whole["cpu_s"], 3)
        row["bytes_share"] = round(1 - row["mb"] / whole["mb"], 3)
    return rows


def families_ir(cache: Path, trace: Path) -> list[dict[str, Any]]:
    """The families' cost in instructions (cachegrind's Ir, PYTHONHASHSEED=0): deterministic,
    so it holds on a loaded machine where CPU seconds do not; the fixed cost of starting and
    building the tables cancels in the differences."""
    imports = "import sys\nfrom tb_plugin.load import load_trace\n"
    parse = imports + "load_trace(sys.argv[1], use_cache=False, processes=1)\n"
    paths = family_variants(cache, trace)
    rows = [{"family": "imports only (subtracted)", "mb": 0.0,
             "ir": _instructions(imports, paths["whole trace"])}]
    for family, path in paths.items():
        rows.append({"family": family, "mb": round(path.stat().st_size / 1e6, 1),
                     "ir": _instructions(parse, path)})
    base, whole = rows[0]["ir"], rows[1]
    whole["parse_ir"] = whole["ir"] - base
    for row in rows[2:]:
        row["saved_share"] = round((whole["ir"] - row["ir"]) / whole["parse_ir"], 3)
        row["bytes_share"] = round(1 - row["mb"] / whole["mb"], 3)
    return rows


def _instructions(script: str, path: Path) -> int:
    done = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no",
                           "--cachegrind-out-file=/dev/null", str(MAIN_PYTHON), "-c", script,
                           str(path)], env={**_env(), "PYTHONHASHSEED": "0"},
                          capture_output=True, text=True, check=True)
    refs = next(line for line in done.stderr.splitlines() if "I   refs" in line)
    return int(refs.split()[-1].replace(",", ""))


# -- profile ------------------------------------------------------------------------------------


def profile(trace: Path) -> dict[str, Any]:
    """Self time by function of a one-core parse: py-spy's samples, else cProfile's."""
    script = ("import sys\nfrom tb_plugin.load import load_trace\n"
              "load_trace(sys.argv[1], use_cache=False, processes=1)\n")
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "p.py").write_text(script)
        spy = shutil.which("py-spy") or os.environ.get("PY_SPY")
        if spy:
            raw = Path(tmp, "raw.txt")
            subprocess.run([spy, "record", "-r", "250", "-f", "raw", "-o", str(raw), "--",
                            str(MAIN_PYTHON), str(Path(tmp, "p.py")), str(trace)], env=_env(),
                           check=True, capture_output=True)
            return {"tool": "py-spy", "functions": _spy_self(raw)}
        out = Path(tmp, "prof")
        subprocess.run([str(MAIN_PYTHON), "-m", "cProfile", "-o", str(out), str(Path(tmp, "p.py")),
                        str(trace)], env=_env(), check=True, capture_output=True)
        return {"tool": "cProfile", "functions": _cprofile_self(out)}


def _in_parse(frames: list[str]) -> bool:
    return any("parse_trace" in f for f in frames)


def _spy_self(raw: Path) -> list[tuple[str, float]]:
    counts: dict[str, int] = {}
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")
        if not _in_parse(frames):  # imports and interpreter start are not the parse
            continue
        total += int(n)
        name = frames[-1].split(" (")[0] + " (" + frames[-1].split("/")[-1]
        counts[name] = counts.get(name, 0) + int(n)
    return [(name, round(n / total, 3)) for name, n in
            sorted(counts.items(), key=lambda kv: -kv[1])[:15]]


def _cprofile_self(path: Path) -> list[tuple[str, float]]:
    stats = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in stats.values())
    rows = sorted(((f"{fn} ({Path(file).name}:{line})", v[2]) for (file, line, fn), v
                   in stats.items()), key=lambda kv: -kv[1])[:15]
    return [(name, round(t / total, 3)) for name, t in rows]


# -- report -------------------------------------------------------------------------------------


def render(result: dict[str, Any]) -> str:
    loads = [x for row in result["traces"] for x in row["load"]]
    out = ["# Parse speed on recorded traces (bench/parse_bench.py)", "",
           f"Machine: {result['machine']}; {result['cores']} usable cores, shared with other "
           f"jobs: load average {min(loads):.1f}-{max(loads):.1f} during the runs (2 cores: "
           "above 2 every process waits; each row says its own). Medians of "
           f"{result['repeats']} fresh processes each, the three kinds interleaved. MB are of "
           "JSON (decompressed). Per core: MB per CPU second of the one-process parse; the "
           "skip-scan is msgspec over the same JSON with every field skipped (no reading, no "
           "gunzip); ratio = skip-scan CPU / our CPU. All cores: the split parse "
           "(ingest/parallel.py), wall; children CPU > 0 means it engaged.", "",
           "| trace | MB | events | skip-scan MB/s | ours MB/s per core | ratio | "
           "one core wall | all cores wall | all cores MB/s | children CPU of all CPU | load |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in result["traces"]:
        out.append(f"| {r['trace']} ({'gz' if r['file'].endswith('.gz') else 'plain'}) | "
                   f"{r['mb']} | {r['events']:,} | {r['skip_mb_s']} | {r['one_mb_s']} | "
                   f"{r['ratio']} | {r['one_wall_s']:.2f} s | {r['split_wall_s']:.2f} s | "
                   f"{r['split_mb_s']} | {r['split_children_cpu_s']:.2f} of "
                   f"{r['split_cpu_s']:.2f} s | {min(r['load']):.1f}-{max(r['load']):.1f} |")
    fam = result.get("families")
    if fam:
        whole = fam[0]
        out += ["", f"## Where the time goes, by field family ({whole['mb']} MB trace, one "
                f"core: {whole['cpu_s']:.2f} s CPU)", "",
                "The trace with one family taken out, parsed on one core; the family costs the "
                "difference (the families overlap: stacks' and memory events' args are in "
                "'all args'). CPU seconds on a loaded machine: a difference below the spread "
                "of the repeats (a negative one) is noise; the instruction counts below are "
                "not.", "",
                "| taken out | share of the bytes | CPU saved | share of the parse |",
                "|---|---:|---:|---:|"]
        for row in fam[1:]:
            out.append(f"| {row['family']} | {row['bytes_share']:.0%} | {row['saved_cpu_s']:.2f} s"
                       f" | {row['saved_share']:.0%} |")
    fam = result.get("families_ir")
    if fam:
        whole = fam[1]
        out += ["", f"## The same in instructions ({whole['mb']} MB trace, cachegrind, "
                f"deterministic under load: {whole['parse_ir'] / 1e9:.2f} G instructions for "
                "the parse, the process's imports subtracted)",
                "", "| taken out | share of the bytes | share of the parse's instructions |",
                "|---|---:|---:|"]
        out += [f"| {row['family']} | {row['bytes_share']:.0%} | {row['saved_share']:.0%} |"
                for row in fam[2:]]
    prof = result.get("profile")
    if prof:
        out += ["", f"## Profile of the one-core parse ({prof['trace']}, {prof['tool']}, self "
                "time, share of the parse)", "", "| function | share |", "|---|---:|"]
        out += [f"| `{name}` | {share:.0%} |" for name, share in prof["functions"]]
    cold = result.get("cold")
    if cold:
        out += ["", "## TensorBoard cold open to Overview + Operator (bench/cold_open.py)", "",
                "| trace | runs | total (median) | each | parse (server log) | load after |",
                "|---|---:|---:|---|---|---|"]
        for name, runs in cold.items():
            totals = [r["total_s"] for r in runs]
            parses = [r["breakdown"].get("parse") for r in runs]
            loads = [round(r["load"], 1) for r in runs if "load" in r]
            out.append(f"| {name} | {len(runs)} | {statistics.median(totals):.1f} s | "
                       f"{', '.join(f'{t:.1f}' for t in totals)} s | {parses} | {loads} |")
    return "\n".join(out) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/parse-bench"))
    parser.add_argument("--sizes", default="50,200,800")
    parser.add_argument("--gpu-mb", type=int, default=200, help="0: no GPU-style trace")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cold", type=int, default=1, help="cold opens of the largest trace")
    parser.add_argument("--no-families", action="store_true")
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--keep", action="store_true",
                        help="keep what this run does not measure from CACHE/parse_results.json")
    parser.add_argument("--render", action="store_true",
                        help="only rewrite parse_results.md from CACHE/parse_results.json")
    parser.add_argument("--families-ir", type=int, default=0, metavar="MB",
                        help="add the families' instruction counts (valgrind) on the MB trace "
                        "to CACHE/parse_results.json, and render")
    args = parser.parse_args(argv)
    raw = args.cache / "parse_results.json"
    if args.render or args.families_ir:
        result = json.loads(raw.read_text())
        if args.families_ir:
            trace = recorded(args.cache, [args.families_ir])[0]
            result["families_ir"] = families_ir(args.cache / f"ir{args.families_ir}", trace)
            raw.write_text(json.dumps(result, indent=1))
        RESULTS.write_text(render(result))
        return 0
    sizes = [int(s) for s in args.sizes.split(",") if s]
    cores = len(os.sched_getaffinity(0))
    traces = recorded(args.cache, sizes)
    if args.gpu_mb:
        traces.append(gpu_scaled(args.cache, args.gpu_mb))
    uname = os.uname()
    result: dict[str, Any] = {"machine": f"{uname.sysname} {uname.machine}, python "
                              f"{sys.version.split()[0]}", "cores": cores,
                              "repeats": args.repeats, "traces": []}
    # what this run does not measure again is kept from the last one (each row has its load)
    earlier = json.loads(raw.read_text()) if args.keep and raw.exists() else {}
    measured = {trace.parent.name for trace in traces}
    result["traces"] = [row for row in earlier.get("traces", []) if row["trace"] not in measured]
    for key in ("families", "families_ir", "profile", "cold"):
        if key in earlier:
            result[key] = earlier[key]
    for trace in traces:
        row = one_trace(trace, args.repeats, cores)
        log(f"{row['trace']}: {row['one_mb_s']} MB/s per core (skip-scan {row['skip_mb_s']}), "
            f"all cores {row['split_wall_s']:.2f} s")
        result["traces"].append(row)
        raw.write_text(json.dumps(result, indent=1))
    if not args.no_families:
        result["families"] = families(args.cache, traces[0], args.repeats)
        log(f"families: {result['families']}")
    if not args.no_profile:
        middle = traces[min(1, len(sizes) - 1)]
        result["profile"] = {"trace": middle.parent.name, **profile(middle)}
    if args.cold:
        largest = traces[len(sizes) - 1]
        result.setdefault("cold", {})[largest.parent.name] = [
            {**cold_ours(sizes[-1], 900, source=largest.parent), "load": os.getloadavg()[0]}
            for _ in range(args.cold)]
        log(f"cold open: {result['cold']}")
    raw.write_text(json.dumps(result, indent=1))
    RESULTS.write_text(render(result))
    print(RESULTS.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
