"""Oracle: Holistic Trace Analysis (HTA) and our GPU Idle view side by side.

Creates its own venv under bench/_work/hta-venv (`pip install holistictraceanalysis`; HTA is
never a dependency of ours), runs HTA's temporal breakdown, idle-time breakdown, kernel launch
statistics and queue length (bench/hta_child.py) on every trace of ../shared/traces and samples/
(one folder per file, as HTA reads a folder of ranks), computes ours, and prints a Markdown table
(also written to bench/hta_results.md). Where the definitions match, the numbers should agree
within 1%; README "HTA comparison" explains the differences.

    python bench/hta_compare.py [--kernel-wait-us 30]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import venv
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from tb_plugin.analysis.gpu_idle.idle import idle_breakdown, queue_lengths, temporal_breakdown  # noqa: E402
from tb_plugin.analysis.gpu_idle.launch_stats import launch_stats  # noqa: E402
from tb_plugin.load import load_trace  # noqa: E402

WORK = HERE / "_work"
VENV = WORK / "hta-venv"
PYTHON = VENV / "bin" / "python"
SHARED = REPO.parent / "shared" / "traces"


def ensure_venv() -> None:
    if PYTHON.exists() and subprocess.run([str(PYTHON), "-c", "import hta"]).returncode == 0:
        return
    venv.create(VENV, with_pip=True)
    subprocess.run([str(PYTHON), "-m", "pip", "install", "-q", "holistictraceanalysis"],
                   check=True)


def traces() -> list[Path]:
    files = sorted(p for p in SHARED.glob("*/*.pt.trace.json*") if "memory_timeline" not in
                   p.name)
    return files + sorted((REPO / "samples").glob("*/*.pt.trace.json*"))


def run_hta(path: Path, kernel_wait: float) -> dict:
    folder = WORK / "hta" / f"{path.parent.name}__{path.name.replace('.', '_')}"
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / path.name
    if not link.exists():
        os.symlink(path, link)
    proc = subprocess.run([str(PYTHON), str(HERE / "hta_child.py"), str(folder),
                           str(kernel_wait)], capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1][:120]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def ours(path: Path, kernel_wait: float) -> dict:
    table = load_trace(str(path), use_cache=False)
    devices = temporal_breakdown(table)
    out: dict = {}
    if devices:
        dev = devices[0]  # HTA analyses one rank = our first GPU
        out["temporal"] = {"window_us": dev["window_us"], "idle_us": dev["idle_us"],
                           "compute_us": dev["compute_us"],
                           "non_compute_us": dev["communication_us"] + dev["memory_us"]}
    streams = idle_breakdown(table, kernel_wait)["streams"]
    out["idle"] = {cat: sum(s[f"{cat}_us"] for s in streams)
                   for cat in ("host_wait", "kernel_wait", "other")}
    stats = launch_stats(table, 50.0, 100.0)
    out["launch"] = {"kernels": stats["kernels"], "short": stats["short_kernels"],
                     "runtime_outliers": stats["runtime_outliers"],
                     "delay_outliers": stats["delay_outliers"]}
    queues = queue_lengths(table, 1024)
    out["queue_max"] = float(max(q["max"] for q in queues)) if queues else None
    return out


def _flat(result: dict) -> dict:
    flat = {}
    for key, value in result.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        elif key != "rank":
            flat[key] = value
    return flat


def _diff(a, b) -> str:
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return ""
    if a == b:
        return "0"
    base = max(abs(a), abs(b))
    return f"{100.0 * abs(a - b) / base:.2f}%"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel-wait-us", type=float, default=30.0)
    args = parser.parse_args()
    ensure_venv()
    lines = ["| trace | metric | HTA | ours | difference |", "|---|---|---:|---:|---:|"]
    for path in traces():
        name = f"{path.parent.name}/{path.name[:28]}"
        hta, mine = _flat(run_hta(path, args.kernel_wait_us)), _flat(ours(path,
                                                                          args.kernel_wait_us))
        for metric in dict.fromkeys([*hta, *mine]):
            a, b = hta.get(metric, "-"), mine.get(metric, "-")
            show = [f"{v:.1f}" if isinstance(v, float) else str(v) for v in (a, b)]
            lines.append(f"| {name} | {metric} | {show[0]} | {show[1]} | {_diff(a, b)} |")
        print(lines[-1], file=sys.stderr)
    text = "\n".join(lines) + "\n"
    (HERE / "hta_results.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
