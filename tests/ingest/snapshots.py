"""Allocator snapshots in the format `torch.cuda.memory._dump_snapshot` writes (see
`tb_plugin/ingest/snapshot.py` and torch/cuda/memory.py `_snapshot`): no GPU here, so these are
built by hand (`hand_snapshot`, with hand-derived expectations in the tests) or by a small
caching-allocator simulation (`simulated_snapshot`) that keeps its trace and dump consistent."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

KIB, MIB = 1 << 10, 1 << 20
T0 = 1_700_000_000_000_000  # epoch us, as `time_us` is written
SEG = 0x7F00_0000_0000  # a CUDA-like address
PRE = 0x7E00_0000_0000  # the segment allocated before recording started


def frames(*names: str) -> list[dict[str, Any]]:
    """Innermost first, the allocator's own frames first, as real stacks are."""
    return [{"filename": "??", "line": 0, "name": "c10::cuda::CUDACachingAllocator::malloc"},
            {"filename": "/usr/lib/python3/site-packages/torch/nn/modules/linear.py",
             "line": 125, "name": "forward"}] + [
        {"filename": "/home/me/train.py", "line": 10 + i, "name": n} for i, n in enumerate(names)]


def entry(action: str, addr: int, size: int, t: int, stack: Any = None, **extra: Any
          ) -> dict[str, Any]:
    return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": T0 + t,
            "frames": stack if stack is not None else [], "compile_context": "N/A",
            "user_metadata": "", **extra}


def hand_snapshot() -> dict[str, Any]:
    """A 20 MiB segment from before recording holding an 8 MiB block P; then in the trace:
    t=10 segment_alloc 2 MiB S; t=11 alloc A 1 MiB at S; t=12 alloc B 512 KiB at S+1 MiB;
    t=13/14 free A (requested, completed); t=15 alloc C 256 KiB at S (reuse); t=16 an OOM.
    Dump: P, and in S: C, 768 KiB free, B, 512 KiB free."""
    fa, fb, fc = frames("make_a", "step"), frames("make_b", "step"), frames("make_c", "step")
    trace = [
        entry("segment_alloc", SEG, 2 * MIB, 10, fa),
        entry("alloc", SEG, MIB, 11, fa),
        entry("alloc", SEG + MIB, 512 * KIB, 12, fb),
        entry("free_requested", SEG, MIB, 13, fa),
        entry("free_completed", SEG, MIB, 14, fa),
        entry("alloc", SEG, 256 * KIB, 15, fc),
        {**entry("oom", 0, 64 * MIB, 16), "device_free": 3 * MIB},
    ]
    pool = (0, 0)
    segments = [
        {"device": 0, "address": PRE, "total_size": 20 * MIB, "allocated_size": 8 * MIB,
         "active_size": 8 * MIB, "requested_size": 8 * MIB, "stream": 0,
         "segment_type": "large", "segment_pool_id": pool, "is_expandable": False,
         "frames": [], "blocks": [
             {"address": PRE, "size": 8 * MIB, "requested_size": 8 * MIB,
              "state": "active_allocated", "frames": frames("load_weights")},
             {"address": PRE + 8 * MIB, "size": 12 * MIB, "requested_size": 0,
              "state": "inactive", "frames": []}]},
        {"device": 0, "address": SEG, "total_size": 2 * MIB, "allocated_size": 768 * KIB,
         "active_size": 768 * KIB, "requested_size": 768 * KIB, "stream": 0,
         "segment_type": "small", "segment_pool_id": pool, "is_expandable": False,
         "frames": fa, "blocks": [
             {"address": SEG, "size": 256 * KIB, "requested_size": 256 * KIB,
              "state": "active_allocated", "frames": fc},
             {"address": SEG + 256 * KIB, "size": 768 * KIB, "requested_size": 0,
              "state": "inactive", "frames": []},
             {"address": SEG + MIB, "size": 512 * KIB, "requested_size": 512 * KIB,
              "state": "active_allocated", "frames": fb},
             {"address": SEG + MIB + 512 * KIB, "size": 512 * KIB, "requested_size": 0,
              "state": "inactive", "frames": []}]},
    ]
    return {"segments": segments, "device_traces": [trace],
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": ""},
            "external_annotations": []}


def write(path: Path, snapshot: Any) -> Path:
    with open(path, "wb") as handle:
        pickle.dump(snapshot, handle)  # as _dump_snapshot does (default protocol)
    return path
