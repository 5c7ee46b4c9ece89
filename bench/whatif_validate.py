"""Does the what-if engine predict? Record pairs of real CPU runs with our recorder (torch, CPU):
a baseline and the same code with one change made for real, then compare the step time the
engine predicts for the baseline under the matching edit with the step time measured on the
changed run (both: mean host step length over the recorded steps).

    python bench/whatif_validate.py [--out bench/whatif_results.md] [--steps 5]

Target (issue 24): every pair within 15%. The machine is shared and noisy; each side is the
mean of `--steps` recorded steps, and both sides of a pair are recorded back to back.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402  (bench dependency: torch==2.13 CPU)
from torch.profiler import record_function  # noqa: E402

from tb_plugin.analysis.steps import compute_steps  # noqa: E402
from tb_plugin.analysis.whatif import build_whatif, parse_edits  # noqa: E402
from tb_plugin.load import load_trace  # noqa: E402
from tb_plugin.recorder import Recorder  # noqa: E402

Step = Callable[[], None]


def _rest() -> Step:
    """The part of every step that no edit touches (about 10 ms of matrix products)."""
    a, b = torch.randn(256, 1024), torch.randn(1024, 1024)

    def rest() -> None:
        for _ in range(6):
            torch.mm(a, b)
    return rest


def _sleep(seconds: float) -> Step:
    rest = _rest()

    def step() -> None:
        rest()
        with record_function("host_sleep"):
            time.sleep(seconds)
    return step


def _matmul(inner: int) -> Step:
    a, b = torch.randn(512, inner), torch.randn(inner, 1024)
    c = torch.randn(256, 256)

    def step() -> None:
        for _ in range(4):
            torch.mm(a, b)
        for _ in range(8):
            torch.relu(c)
    return step


def _preprocess(work: int) -> Step:
    rest = _rest()

    def step() -> None:
        with record_function("preprocess"):
            total = 0.0
            for i in range(work):  # CPU work in Python, as a decoder or tokenizer would do
                total += (i % 7) * 0.5
        rest()
    return step


def _elementwise(repeats: int) -> Step:
    x = torch.randn(2048, 2048)
    rest = _rest()

    def step() -> None:
        y = x
        for _ in range(repeats):
            y = torch.relu(y)
        rest()
    return step


class _Slow(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 10_000

    def __getitem__(self, index: int) -> torch.Tensor:
        time.sleep(0.002)  # an expensive decode
        return torch.randn(32)


def _loader(workers: int) -> Step:
    """16 ms of loading per batch; with 2 workers a batch is ready every 8 ms, less than the
    step's 20 ms of compute, so the loading leaves the step (what `dataloader=0` predicts; a
    loader slower than the compute would bound the step instead, which the edit does not
    model)."""
    loader = iter(torch.utils.data.DataLoader(_Slow(), batch_size=8, num_workers=workers,
                                              prefetch_factor=4 if workers else None))
    rest = _rest()

    def step() -> None:
        next(loader)
        rest()
        rest()
    return step


#: name, baseline, changed (for real), edit on the baseline
PAIRS: list[tuple[str, Callable[[], Step], Callable[[], Step], str]] = [
    ("sleep 20 ms removed", lambda: _sleep(0.02), lambda: _sleep(0.0), "op:host_sleep=0"),
    ("sleep 20 -> 10 ms", lambda: _sleep(0.02), lambda: _sleep(0.01), "op:host_sleep=0.5"),
    ("matmul half the size", lambda: _matmul(2048), lambda: _matmul(1024), "op:aten::mm=0.5"),
    ("preprocessing halved", lambda: _preprocess(400_000), lambda: _preprocess(200_000),
     "op:preprocess=0.5"),
    ("relu chain removed", lambda: _elementwise(12), lambda: _elementwise(0),
     "op:aten::relu=0"),
    ("DataLoader 0 -> 2 workers", lambda: _loader(0), lambda: _loader(2), "dataloader=0"),
]


def record(step: Step, logdir: Path, run: str, steps: int) -> Any:
    with Recorder(logdir, run=run, wait=1, warmup=2, active=steps, repeat=1,
                  profile_memory=False, with_stack=False, with_modules=False) as rec:
        for _ in range(3 + steps + 1):
            step()
            rec.step()
    files = sorted((logdir / run).glob("*.pt.trace.json*"))
    return load_trace(str(files[-1]), use_cache=False)


def mean_step(table: Any) -> float:
    steps = compute_steps(table)
    return statistics.mean(float(e - s) for s, e in zip(steps.host_starts, steps.host_ends))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "whatif_results.md")
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for index, (name, base, changed, edit) in enumerate(PAIRS):
            base_table = record(base(), Path(tmp), f"base{index}", args.steps)
            changed_table = record(changed(), Path(tmp), f"changed{index}", args.steps)
            predicted = build_whatif(base_table, parse_edits(edit))["predicted_us"]
            measured = mean_step(changed_table)
            original = mean_step(base_table)
            error = 100.0 * (predicted - measured) / measured
            rows.append((name, edit, original, predicted, measured, error))
            print(f"{name:28s} {edit:22s} base {original / 1e3:8.2f} ms  predicted "
                  f"{predicted / 1e3:8.2f} ms  measured {measured / 1e3:8.2f} ms  "
                  f"error {error:+6.1f}%", flush=True)
    lines = ["| pair | edit | baseline step | predicted | measured | error |",
             "|---|---|---:|---:|---:|---:|"]
    lines += [f"| {n} | `{e}` | {o / 1e3:.2f} ms | {p / 1e3:.2f} ms | {m / 1e3:.2f} ms | "
              f"{err:+.1f}% |" for n, e, o, p, m, err in rows]
    worst = max(abs(r[-1]) for r in rows)
    lines.append(f"\nWorst |error|: {worst:.1f}% (target 15%); torch {torch.__version__}, CPU, "
                 f"1 intra-op thread, {args.steps} recorded steps per side.")
    args.out.write_text("\n".join(lines) + "\n")
    print(f"worst |error| {worst:.1f}%; wrote {args.out}")


if __name__ == "__main__":
    main()
