"""The Diff's per-step basis on a two-step run recorded with our recorder (torch on CPU),
against values derived by hand from the trace's own events: the model module runs once per
step, so its per-step time is the sum of its two `nn.Module` events divided by 2 (the bug
was each occurrence divided by 2: half the real time, listed twice)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tb_plugin.analysis.diff.tree import build_diff
from tb_plugin.load import load_trace
from tests.support import import_torch
from tests.test_recorder import run_child, trace_files

pytestmark = pytest.mark.e2e

#: The payload's times are rounded to 3 decimals (us) after the trace's own 3-decimal us: two
#: roundings apart, at most 0.001 us plus float error (half a step is ~150 us: a wrong basis is
#: 1e5 times further off).
ROUNDING = 2e-3


@pytest.fixture(scope="module")
def two_steps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import_torch()
    cwd = tmp_path_factory.mktemp("diff_steps")
    run_child("""
        class SmallNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.a, self.b = nn.Linear(8, 64), nn.Linear(64, 2)

            def forward(self, x):
                return self.b(torch.relu(self.a(x)))

        with Recorder("logs", run="two", wait=0, warmup=1, active=2, repeat=1) as rec:
            train(rec, 3, SmallNet())
        report(written=rec.written)
        """, cwd)
    (path,) = trace_files(cwd / "logs" / "two")
    return path


def test_a_module_run_once_per_step_shows_its_time_per_step(two_steps: Path) -> None:
    with gzip.open(two_steps, "rt") as f:
        events = json.load(f)["traceEvents"]
    steps = [e for e in events if e.get("name", "").startswith("ProfilerStep#")
             and e.get("cat") in ("cpu_op", "user_annotation")]
    assert len(steps) == 2
    calls = [e["dur"] for e in events if e.get("name") == "nn.Module: SmallNet_0"
             and e.get("ph") == "X"]
    assert len(calls) == 2  # once per step
    table = load_trace(str(two_steps), use_cache=False)
    root = build_diff(table, table)
    model = [c for c in root["children"] if c["left"]["name"] == "nn.Module: SmallNet_0"]
    assert len(model) == 1
    assert model[0]["left"]["host_duration_us"] == pytest.approx(sum(calls) / 2, abs=ROUNDING)
    total = build_diff(table, table, basis="total")
    model = [c for c in total["children"] if c["left"]["name"] == "nn.Module: SmallNet_0"]
    assert model[0]["left"]["host_duration_us"] == pytest.approx(sum(calls), abs=ROUNDING)
    linears = build_diff(table, table, model[0]["path"])["children"]  # per step below too
    assert [c["left"]["name"] for c in linears][:1] == ["nn.Module: Linear_0"]
    first = [e["dur"] for e in events if e.get("name") == "nn.Module: Linear_0"
             and e.get("ph") == "X"]
    assert len(first) == 2
    assert linears[0]["left"]["host_duration_us"] == pytest.approx(sum(first) / 2, abs=ROUNDING)
