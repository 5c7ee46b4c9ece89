"""Validate `torch-prof compare` on recorded runs (CPU, our recorder): A/A pairs of identical
code must not be flagged, and injected regressions in one operator must be found with that
operator ranked first.

    nice python bench/regression_validate.py [--pairs 20] [--runs 4] [--steps 16]
        [--statistic p20] [--out FILE]

What it records, in one process, with `tb_plugin.recorder.Recorder` (torch on CPU, one thread):

- a small MLP (`Net`: three `Block`s of Linear + ReLU, a head) trained with SGD; its step
  time on this machine is a few ms;
- every comparison side is `--runs` runs of `--steps` recorded steps, and the two sides'
  runs are interleaved (A B A B ...) so that slow drifts of the host hit both alike;
- A/A: `--pairs` pairs of identical code;
- injected: the same model with an extra matmul inside `Block.forward` of the first block,
  `torch.mm(w, w)` repeated r times, r sized from a calibration run to cost 3%, 5% and 10% of
  the baseline step (the share achieved is measured and reported: the host is noisy).

Each pair goes through the same code as `torch-prof compare` (per-step summaries, the
hierarchical bootstrap over runs and steps, 95% confidence, 1% minimum change). A pair is
*flagged* when the step-time verdict is regressed or improved. An injection is *detected*
when the comparison ranks `aten::mm` first among the regressed operators; whether the step
time itself was flagged is reported beside it.

Writes `bench/regression_results.md` (the table the README quotes).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tb_plugin.analysis.compare.compare import compare  # noqa: E402
from tb_plugin.analysis.compare.summary import step_summary  # noqa: E402
from tb_plugin.load import load_trace  # noqa: E402
from tb_plugin.recorder import Recorder  # noqa: E402

RESULTS = REPO / "bench" / "regression_results.md"
SHARES = (0.03, 0.05, 0.10)
OPERATOR = "aten::mm"
EXTRA = 48  # side of the injected square matmul


class Block(nn.Module):
    def __init__(self, width: int, extra: int) -> None:
        super().__init__()
        self.linear = nn.Linear(width, width)
        self.extra = extra
        self.w = torch.randn(EXTRA, EXTRA)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.extra):  # the injected regression
            x = x + torch.mm(self.w, self.w)[0, 0] * 0
        return torch.relu(self.linear(x))


class Net(nn.Module):
    def __init__(self, extra: int = 0, width: int = 128) -> None:
        super().__init__()
        self.blocks = nn.Sequential(Block(width, extra), Block(width, 0), Block(width, 0))
        self.head = nn.Linear(width, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(x))


def record(logdir: Path, run: str, extra: int, steps: int) -> Path:
    """One run of `steps` recorded steps (after one warm-up step); the trace's path."""
    torch.manual_seed(0)
    model = Net(extra)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 128), torch.randint(0, 10, (64,))
    with Recorder(logdir, run=run, worker="w", wait=0, warmup=1, active=steps, repeat=1,
                  profile_memory=False) as rec:
        for _ in range(steps + 1):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step()
    (path,) = [p for p in rec.written if p.endswith(".pt.trace.json.gz")]
    return Path(path)


def summaries(paths: list[Path]) -> list[list[dict]]:
    return [[step_summary(load_trace(str(p), use_cache=False))] for p in paths]


def side_pair(logdir: Path, name: str, extra: int, runs: int, steps: int
              ) -> tuple[list[list[dict]], list[list[dict]]]:
    """Base and experiment runs, interleaved A B A B ..."""
    base, exp = [], []
    for i in range(runs):
        base.append(record(logdir, f"{name}_a{i}", 0, steps))
        exp.append(record(logdir, f"{name}_b{i}", extra, steps))
    return summaries(base), summaries(exp)


def calibrate(logdir: Path, steps: int, statistic: str) -> tuple[float, float]:
    """(baseline step time, cost of one injected matmul in the profile), us."""
    probe = 40
    base, exp = side_pair(logdir, "calibrate", probe, 2, steps)
    out = compare(base, exp, statistic=statistic)
    row = next(r for r in out["metrics"] if r["metric"] == f"operator:{OPERATOR}")
    return out["headline"]["base_us"], max(row["delta_us"] / probe, 1e-3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--statistic", default="p20", help="as compare --statistic (default "
                        "p20: on the 2-core host shared by many jobs this was measured on, "
                        "about half the steps are preempted by 10-25 ms)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    started = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        logdir = Path(folder)
        step_us, mm_us = calibrate(logdir, args.steps, args.statistic)
        print(f"calibration: step {step_us:.0f} us, one injected matmul {mm_us:.1f} us",
              flush=True)
        flagged = 0
        for i in range(args.pairs):
            out = compare(*side_pair(logdir, f"aa{i}", 0, args.runs, args.steps),
                          statistic=args.statistic)
            head = out["headline"]
            flagged += out["verdict"] != "unchanged"
            ops = sum(1 for r in out["metrics"] if r["verdict"] != "unchanged")
            rows.append(("A/A", i + 1, None, out, ops))
            print(f"A/A {i + 1}: {out['verdict']} {head['relative'] * 100:+.2f}% "
                  f"[{head['low_us'] / head['base_us'] * 100:+.2f}, "
                  f"{head['high_us'] / head['base_us'] * 100:+.2f}]%, {ops} metrics flagged",
                  flush=True)
        injected = []
        for share in SHARES:
            reps = max(1, round(share * step_us / mm_us))
            out = compare(*side_pair(logdir, f"inj{int(share * 100)}", reps, args.runs,
                                     args.steps), statistic=args.statistic)
            top = [r["name"] for r in out["top_regressed"]]
            injected.append((share, reps, out, top))
            print(f"injected {share:.0%} ({reps} matmuls): {out['verdict']}, top {top[:3]}",
                  flush=True)
    elapsed = time.monotonic() - started
    write_results(args, rows, injected, flagged, step_us, mm_us, elapsed)
    return 0


def _pct(value: float) -> str:
    return f"{value * 100:+.2f}%"


def write_results(args, rows, injected, flagged, step_us, mm_us, elapsed) -> None:
    lines = [
        "# torch-prof compare: A/A and injected regressions",
        "",
        f"`nice python bench/regression_validate.py --pairs {args.pairs} --runs {args.runs} "
        f"--steps {args.steps} --statistic {args.statistic}` on {platform.machine()} "
        f"({os.cpu_count()} cores, shared and loaded), torch {torch.__version__}, CPU, one "
        f"thread; {elapsed / 60:.1f} min.",
        f"Each side: {args.runs} runs x {args.steps} steps, interleaved with the other side's; "
        f"statistic per run: {args.statistic}; 95% confidence, 1% minimum change, bootstrap "
        "over runs and steps.",
        f"Calibration: baseline step {step_us / 1e3:.2f} ms, one injected "
        f"{EXTRA}x{EXTRA} matmul {mm_us:.1f} us in the profile.",
        "",
        "## Injected regressions (one operator: extra `torch.mm` in the first block)",
        "",
        "| target | matmuls | step-time change (95% interval) | step verdict | "
        f"`{OPERATOR}` delta (share of step) | rank of `{OPERATOR}` | detected |",
        "|---:|---:|---|---|---|---:|---|",
    ]
    for share, reps, out, top in injected:
        head = out["headline"]
        row = next(r for r in out["metrics"] if r["metric"] == f"operator:{OPERATOR}")
        rank = top.index(OPERATOR) + 1 if OPERATOR in top else "-"
        lines.append(
            f"| {share:.0%} | {reps} | {_pct(head['relative'])} "
            f"[{_pct(head['low_us'] / head['base_us'])}, "
            f"{_pct(head['high_us'] / head['base_us'])}] | {out['verdict']} | "
            f"{row['delta_us']:.0f} us ({_pct(row['delta_us'] / head['base_us'])}) | {rank} | "
            f"{'yes' if rank == 1 else 'no'} |")
    lines += [
        "",
        f"## A/A pairs (identical code): {flagged} of {len(rows)} flagged at 95% "
        "(the step-time verdict)",
        "",
        "| pair | step-time change | 95% interval | verdict | metrics flagged (of all) |",
        "|---:|---:|---|---|---|",
    ]
    for _, i, _, out, ops in rows:
        head = out["headline"]
        lines.append(f"| {i} | {_pct(head['relative'])} | "
                     f"[{_pct(head['low_us'] / head['base_us'])}, "
                     f"{_pct(head['high_us'] / head['base_us'])}] | {out['verdict']} | "
                     f"{ops} of {len(out['metrics'])} |")
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
