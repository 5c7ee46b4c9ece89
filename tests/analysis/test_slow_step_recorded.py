"""Issue 27's "done when": a run recorded with our recorder (CPU torch) with one deliberately
stalled step gets that outlier named with its cause, in the Overview's variance section and as
its recommendation: a sleep in the Dataset's `__getitem__` for one sample (data loading), and a
`time.sleep` in the loop outside any operator (a host stall)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tb_plugin.analysis.overview import build_overview
from tb_plugin.load import load_trace
from tb_plugin.recorder import Recorder  # imports torch only when recording starts
from tests.support import import_torch

pytestmark = pytest.mark.e2e

STEPS = 8
STALLED = 5  # the iteration (0-based) whose step stalls
STALL_S = 0.15


def _record(logdir: Path, where: str) -> tuple[Path, str]:
    """Record STEPS steps with one stall of STALL_S; returns the trace and the stalled step's
    name (the profiler's step number while that iteration ran)."""
    torch = import_torch()

    class Samples(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return STEPS

        def __getitem__(self, index: int):
            if where == "loader" and index == STALLED:
                time.sleep(STALL_S)
            return torch.randn(64)

    model = torch.nn.Linear(64, 64)
    loader = torch.utils.data.DataLoader(Samples(), batch_size=1, num_workers=0)
    stalled = ""
    with Recorder(logdir, run=where, worker="w", wait=0, warmup=1, active=STEPS - 1,
                  repeat=1) as rec:
        for i, batch in enumerate(loader):
            if i == STALLED:
                stalled = str(rec.profiler.step_num)
                if where == "loop":
                    time.sleep(STALL_S)
            model(batch).sum().backward()
            rec.step()
    (trace,) = sorted((logdir / where).glob("*.pt.trace.json.gz"))
    return trace, stalled


@pytest.mark.parametrize(("where", "cause", "words"), [
    ("loader", "data_loading", "DataLoader waited"),
    ("loop", "host_stall", "with no operator running"),
])
def test_a_stalled_step_is_named_with_its_cause(tmp_path: Path, where, cause, words) -> None:
    trace, stalled = _record(tmp_path, where)
    overview = build_overview(load_trace(str(trace), use_cache=False))
    variance = overview["variance"]
    top = variance["outliers"][0]  # slowest first; noise may add others, never before it
    assert (top["step"], top["cause"]) == (stalled, cause)
    # the stall is in the step and in its cause: at least 150 ms more than the median step
    assert top["excess_us"] >= 1e6 * STALL_S and top["cause_us"] >= 1e6 * STALL_S
    assert top["end_us"] - top["start_us"] >= 1e6 * STALL_S
    # named (its rank among the other advice depends on what the host's noise adds to them)
    (item,) = [r for r in overview["recommendations"] if r["id"] == "slow_step"]
    assert item["evidence_step"] == stalled
    assert f"Step {stalled} is " in item["text"] and words in item["text"]
    steps = len(overview["steps"])
    excess = sum(o["excess_us"] for o in variance["outliers"])
    assert item["saving_us"] == pytest.approx(excess / steps, abs=0.01)
