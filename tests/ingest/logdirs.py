"""Test helper: a small logdir with every kind of run discovery must recognise."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

TRACE = json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "op", "ts": 1,
                                     "dur": 2, "pid": 1, "tid": 1}]}).encode()


def write_logdir(root: Path) -> None:
    """run_a: timed and untimed traces; deep/er/run_b: a sniffed trace, a non-trace JSON and a
    memory export; legacy: an autograd bare array; the logdir itself: one trace."""
    (root / "run_a").mkdir(parents=True)
    for stamp in ("99", "1000", "123"):
        (root / "run_a" / f"host_1.{stamp}.pt.trace.json").write_bytes(TRACE)
    (root / "run_a" / "host_2.pt.trace.json.gz").write_bytes(gzip.compress(TRACE))
    (root / "run_a" / "notes.txt").write_text("not a trace")
    (root / "deep" / "er" / "run_b").mkdir(parents=True)
    (root / "deep" / "er" / "run_b" / "export.json").write_bytes(TRACE)  # sniffed
    (root / "deep" / "er" / "run_b" / "config.json").write_text('{"lr": 0.1}')  # not a trace
    (root / "deep" / "er" / "run_b" / "w.raw.json.gz").write_bytes(gzip.compress(b"[]"))
    (root / "legacy").mkdir()
    (root / "legacy" / "autograd.json").write_text(
        '[{"name": "mm", "ph": "X", "ts": 1, "dur": 1, "pid": "CPU Functions", "tid": 0}]')
    (root / "top.pt.trace.json").write_bytes(TRACE)  # the logdir itself is a run
