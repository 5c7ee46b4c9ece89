"""Leak flags that mean it (issue 17): a deliberately leaking CPU recording is flagged with the
allocating operator; the same loop without the leak, every sample run and every shared trace
are not."""

from __future__ import annotations

from pathlib import Path

from tb_plugin.analysis.memory.view import build_memory
from tb_plugin.discovery import discover_runs
from tb_plugin.load import load_trace
from tb_plugin.recorder import Recorder  # imports torch only when recording starts
from tb_plugin.views.registry import build_view
from tests.support import SAMPLES, SHARED_TRACES, import_torch, needs_shared

MIB = 1 << 20
KEPT = (512, 512)  # float32: exactly 1 MiB kept per step by the leaking loop


def _record(logdir: Path, run: str, leak: bool) -> Path:
    torch = import_torch()
    kept = []
    model = torch.nn.Linear(64, 64)
    with Recorder(logdir, run=run, worker="w", wait=0, warmup=1, active=5, repeat=1) as rec:
        for _ in range(6):
            model(torch.randn(32, 64)).sum().backward()
            if leak:
                kept.append(torch.randn(*KEPT))
            rec.step()
    (trace,) = sorted((logdir / run).glob("*.pt.trace.json.gz"))
    return trace


def test_a_leaking_recording_is_flagged_with_the_allocating_operator(tmp_path: Path) -> None:
    payload = build_memory(load_trace(_record(tmp_path, "leaky", leak=True), use_cache=False))
    (flag,) = payload["leaks"]
    assert flag["device"] == "CPU" and flag["kind"] == "growth"
    assert len(flag["steps"]) == 5
    levels = flag["allocated_at_step_end"]
    # each step keeps one more 1 MiB tensor: every rise is at least that, and not twice that
    assert all(MIB <= b - a < 2 * MIB for a, b in zip(levels, levels[1:]))
    assert flag["growth_bytes"] == levels[-1] - levels[0] >= 4 * MIB
    top = flag["top_ops"][0]
    assert top["name"].startswith("aten::randn")
    # the tensors kept after the first step end: steps 2-5
    assert 4 * MIB <= top["bytes"] < 5 * MIB and top["count"] >= 4


def test_the_same_loop_without_the_leak_is_not_flagged(tmp_path: Path) -> None:
    payload = build_memory(load_trace(_record(tmp_path, "healthy", leak=False),
                                      use_cache=False))
    assert payload["leaks"] == []
    assert payload["peaks"]["CPU"]["reserved_bytes"] is None  # no reserved pool on the CPU
    assert payload["curves"]["CPU"]["reserved"] == [None] * len(payload["curves"]["CPU"]["t_us"])


def _callouts(root: Path) -> dict[str, list]:
    """Every leak callout of every worker span under `root` (memory view and paired export),
    and how many spans were looked at."""
    found, seen = {}, 0
    for run in discover_runs(str(root)):
        for worker, spans in run.workers.items():
            for span in spans:
                table = load_trace(span.ref)
                seen += 1
                leaks = list(build_memory(table)["leaks"])
                if span.memory_timeline is not None:
                    leaks += build_view(table, "memory_timeline", span.memory_timeline)["leaks"]
                if leaks:
                    found[f"{run.name}/{worker}/{span.span}"] = leaks
    assert seen > 0
    return found


def test_no_leak_callout_on_the_sample_runs() -> None:
    assert _callouts(SAMPLES) == {}


@needs_shared
def test_no_leak_callout_on_the_shared_traces() -> None:
    assert _callouts(SHARED_TRACES) == {}
