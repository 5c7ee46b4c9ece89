"""Allocator snapshots in the format `torch.cuda.memory._dump_snapshot` writes (see
`tb_plugin/ingest/snapshot.py` and torch/cuda/memory.py `_snapshot`): no GPU here, so these are
built by hand (`hand_snapshot`, with hand-derived expectations in the tests) or by a small
caching-allocator simulation (`simulated_snapshot`) that keeps its trace and dump consistent."""

from __future__ import annotations

import os
import pickle
import random
from pathlib import Path
from typing import Any

from tb_plugin.load import load_trace

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


def into_trace_period(data: dict[str, Any], trace: Path) -> dict[str, Any]:
    """`data` with its entries' `time_us` moved to start at the trace's first event (on the
    epoch clock the trace's `baseTimeNanoseconds` gives), spacing kept."""
    table = load_trace(trace, use_cache=False)
    start_us = table.metadata.base_time_ns / 1000 + float(table.events["ts"].min())
    entries = [e for trace_entries in data["device_traces"] for e in trace_entries]
    first = min(e["time_us"] for e in entries)
    for entry in entries:
        entry["time_us"] = entry["time_us"] - first + start_us
    return data


def write(path: Path, snapshot: Any) -> Path:
    with open(path, "wb") as handle:
        pickle.dump(snapshot, handle)  # as _dump_snapshot does (default protocol)
    return path


class Simulated:
    """A tiny caching allocator (first fit in 2 MiB-rounded segments, two-phase frees, an
    occasional empty_cache) that writes its trace and dump in the snapshot format and keeps
    the ground truth after every entry: `allocated[i]`, `reserved[i]` and `live[i]` (address ->
    size) after entry i; `pre` is the state before the first entry."""

    def __init__(self, seed: int, operations: int = 400) -> None:
        self.rng = random.Random(seed)
        self.trace: list[dict[str, Any]] = []
        self.segments: dict[int, int] = {}  # address -> size
        self.blocks: dict[int, tuple[int, list[dict[str, Any]]]] = {}  # address -> (size, frames)
        self.next_segment = SEG
        self.t = 0
        self.allocated: list[int] = []
        self.reserved: list[int] = []
        self.live: list[dict[int, int]] = []
        for _ in range(3):  # allocated before recording started: no trace entries
            self._place(self.rng.randrange(1, 3 * MIB), record=False)
        self.pre = {a: s for a, (s, _) in self.blocks.items()}
        self.pre_reserved = sum(self.segments.values())
        for _ in range(operations):
            roll = self.rng.random()
            if self.blocks and roll < 0.45:
                self._free(self.rng.choice(sorted(self.blocks)))
            elif roll < 0.48:
                self._empty_cache()
            else:
                self._place(self.rng.choice([self.rng.randrange(1, 64 * KIB),
                                             self.rng.randrange(1, 4 * MIB)]))

    def _log(self, action: str, addr: int, size: int, stack: Any) -> None:
        self.t += self.rng.randrange(1, 5)
        self.trace.append(entry(action, addr, size, self.t, stack))
        self.allocated.append(sum(s for s, _ in self.blocks.values()))
        self.reserved.append(sum(self.segments.values()))
        self.live.append({a: s for a, (s, _) in self.blocks.items()})

    def _place(self, size: int, record: bool = True) -> None:
        size = -(-size // 512) * 512
        stack = frames(f"alloc_{self.rng.randrange(5)}", "train_step")
        for start in sorted(self.segments):
            cursor = start
            for addr in sorted(a for a in self.blocks if start <= a < start + self.segments[start]):
                if addr - cursor >= size:
                    break
                cursor = addr + self.blocks[addr][0]
            if start + self.segments[start] - cursor >= size:
                self.blocks[cursor] = (size, stack)
                if record:
                    self._log("alloc", cursor, size, stack)
                return
        seg_size = -(-size // (2 * MIB)) * 2 * MIB
        start, self.next_segment = self.next_segment, self.next_segment + seg_size + 2 * MIB
        self.segments[start] = seg_size
        if record:
            self._log("segment_alloc", start, seg_size, stack)
        self.blocks[start] = (size, stack)
        if record:
            self._log("alloc", start, size, stack)

    def _free(self, addr: int) -> None:
        size, stack = self.blocks[addr]
        self._log("free_requested", addr, size, stack)
        del self.blocks[addr]
        self._log("free_completed", addr, size, stack)

    def _empty_cache(self) -> None:
        for start, size in sorted(self.segments.items()):
            if not any(start <= a < start + size for a in self.blocks):
                del self.segments[start]
                self._log("segment_free", start, size, [])

    def snapshot(self) -> dict[str, Any]:
        segments = []
        for start, size in sorted(self.segments.items()):
            blocks, cursor = [], start
            for addr in sorted(a for a in self.blocks if start <= a < start + size):
                if addr > cursor:
                    blocks.append({"address": cursor, "size": addr - cursor,
                                   "requested_size": 0, "state": "inactive", "frames": []})
                block_size, stack = self.blocks[addr]
                blocks.append({"address": addr, "size": block_size,
                               "requested_size": block_size, "state": "active_allocated",
                               "frames": stack})
                cursor = addr + block_size
            if cursor < start + size:
                blocks.append({"address": cursor, "size": start + size - cursor,
                               "requested_size": 0, "state": "inactive", "frames": []})
            used = sum(b["size"] for b in blocks if b["state"] != "inactive")
            segments.append({"device": 0, "address": start, "total_size": size,
                             "allocated_size": used, "active_size": used, "stream": 0,
                             "segment_type": "large" if size > 2 * MIB else "small",
                             "segment_pool_id": (0, 0), "is_expandable": False,
                             "blocks": blocks})
        return {"segments": segments, "device_traces": [list(self.trace)]}


class _WritesAFile:
    """Unpickling this would create `path` (the classic `__reduce__` payload)."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> Any:
        return (open, (self.path, "w"))


class _RunsAShellCommand:
    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> Any:
        return (os.system, (f"touch {self.path}",))


def evil_pickles(target: Path) -> dict[str, bytes]:
    """Pickles that would create `target` if anything in them ran, hidden inside a snapshot."""
    snapshot = hand_snapshot()
    nested = {**snapshot, "device_traces": [[*snapshot["device_traces"][0],
                                             {"action": "alloc", "frames": _WritesAFile(target)}]]}
    out = {f"reduce-protocol-{p}": pickle.dumps(nested, protocol=p) for p in (0, 2, 4, 5)}
    out["os.system"] = pickle.dumps({"segments": [_RunsAShellCommand(target)],
                                     "device_traces": []})
    # a hand-written protocol-0 GLOBAL + REDUCE, and a persistent id
    out["global-opcode"] = (b"cbuiltins\nopen\n(V" + str(target).encode() + b"\nVw\ntR.")
    out["persistent-id"] = b"(dp0\nVsegments\np1\nPevil\np2\ns."
    return out
