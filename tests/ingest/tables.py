"""Test helpers: generated traces, and an exact comparison of two parsed tables."""

from __future__ import annotations

import json
import random
from typing import Any

import numpy as np
import pandas as pd

from tb_plugin.ingest import TraceTable


def assert_same_table(expected: TraceTable, actual: TraceTable) -> None:
    """Every table, column, category (in order), code and value; metadata; status."""
    for name, left in expected.tables().items():
        right = actual.tables()[name]
        assert list(left.columns) == list(right.columns), name
        assert len(left) == len(right), (name, len(left), len(right))
        for column in left.columns:
            a, b = left[column], right[column]
            where = f"{name}.{column}"
            if isinstance(a.dtype, pd.CategoricalDtype):
                assert isinstance(b.dtype, pd.CategoricalDtype), where
                assert list(a.cat.categories) == list(b.cat.categories), where
                assert np.array_equal(a.cat.codes.to_numpy(), b.cat.codes.to_numpy()), where
            else:
                assert a.dtype == b.dtype, where
                assert np.array_equal(a.to_numpy(), b.to_numpy(), equal_nan=True), where
    assert expected.metadata == actual.metadata
    assert expected.status == actual.status


_SHAPES = [[[2, 8], [8, 5]], [[64, 128]], [], [[1], [], [3, 3]], [[16, 3, 224, 224]]]
_TYPES = [["float", "float"], ["c10::Half"], [], ["long int", "Scalar"]]


def make_events(count: int, seed: int = 0) -> list[dict[str, Any]]:
    """A mix of every event shape the parser routes somewhere, with new names, shapes and
    call stacks appearing all along the file (so the second half brings new categories)."""
    rng = random.Random(seed)
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 10, "tid": 0, "args": {"name": "python3"}},
    ]
    for i in range(count):
        ts = 1000.0 + i * 3.5
        op = f"aten::op{rng.randrange(40)}" if rng.random() < 0.97 else f"aten::rare{i}"
        kind = i % 12
        if kind < 4:
            events.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": 10, "tid": 11,
                           "ts": ts, "dur": rng.randrange(1, 50), "args": {
                               "External id": i, "Input Dims": rng.choice(_SHAPES),
                               "Input type": rng.choice(_TYPES),
                               "Call stack": f"model.py({rng.randrange(200)}): forward",
                               "Sequence number": i // 3, "Fwd thread id": 1}})
        elif kind == 4:
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                           "pid": 10, "tid": 11, "ts": ts, "dur": 4,
                           "args": {"External id": i - 1, "correlation": i}})
        elif kind == 5:
            events.append({"ph": "X", "cat": "kernel", "name": f"gemm_{rng.randrange(9)}",
                           "pid": 0, "tid": f"stream {rng.choice([7, 13])}", "ts": ts + 9,
                           "dur": 12.25, "args": {
                               "External id": i - 2, "correlation": i - 1, "device": 0,
                               "stream": 7, "grid": [rng.randrange(1, 99), 1, 1],
                               "block": [128, 1, 1], "registers per thread": 32,
                               "blocks per SM": 0.5, "est. achieved occupancy %": 25}})
        elif kind == 6:
            events.append({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]",
                           "pid": 10, "tid": 11, "ts": ts, "s": "t", "args": {
                               "Device Type": 1, "Device Id": 0, "Addr": 4096 * i,
                               "Bytes": rng.choice([512, -512]), "Total Allocated": 1 << 20,
                               "Total Reserved": 2 << 20}})
        elif kind == 7:
            flow = {"ph": "s" if i % 24 == 7 else "f", "cat": "ac2g", "name": "ac2g",
                    "id": i // 24, "pid": 10 if i % 24 == 7 else 0, "tid": 11, "ts": ts}
            if flow["ph"] == "f":
                flow["bp"] = "e"
            events.append(flow)
        elif kind == 8:
            events.append({"ph": "X", "cat": "python_function", "name": f"nn.Module: {op}",
                           "pid": 10, "tid": 11, "ts": ts, "dur": 2, "args": {
                               "Python id": i, "Python parent id": i - 8,
                               "Python module id": 3}})
        elif kind == 9:  # missing fields and odd ids: the interners' missing value and ids
            events.append({"ph": "X", "name": op if i % 2 else None, "ts": ts, "dur": 1,
                           "pid": rng.choice([10, 10.0, "Spans", None]),
                           "tid": rng.choice([11, "11", None, f"thread {i % 97}"])})
        elif kind == 10:
            events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}",
                           "pid": 10, "tid": 11, "ts": ts, "dur": 30})
        else:
            events.append({"ph": "X", "cat": rng.choice(["gpu_memcpy", "Memset", "Custom"]),
                           "name": "Memcpy HtoD", "pid": 0, "tid": 7, "ts": ts, "dur": 3,
                           "args": {"bytes": 1024, "memory bandwidth (GB/s)": 11.5}})
        if i % 5000 == 4999:
            events.append({"ph": "M", "name": "thread_name", "pid": 10, "tid": i,
                           "args": {"name": f"thread {i}"}})
    return events


def document(events: list[dict[str, Any]], metadata_after: bool = False) -> bytes:
    """A Kineto-style trace; `metadata_after` puts top-level keys after traceEvents too."""
    head = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "A100"}]}
    tail = {"distributedInfo": {"rank": 0}, "baseTimeNanoseconds": 1700000000000000000,
            "Framework": "pytorch"}
    doc = {**head, "traceEvents": events, **tail} if metadata_after else {
        **head, **tail, "traceEvents": events}
    return json.dumps(doc, indent=None).encode()
