"""Record a real CPU training-loop trace with ``torch.profiler``.

Run as a child process (``python bench/record.py --out DIR --steps N``) so that torch's memory
(Kineto keeps every event in RAM until export) is returned to the OS as soon as the trace is
written, and so that an address-space cap can be applied to torch alone, not to the harness.

The file is written by ``torch.profiler.tensorboard_trace_handler``, i.e. it is named
``<worker>.<timestamp_ns>.pt.trace.json`` exactly as a user's TensorBoard run folder would hold.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# Kineto's in-memory buffers grow with the number of recorded events; cap the address space so
# that a mis-calibrated run fails fast instead of pushing a shared 24 GiB machine into swap/OOM.
DEFAULT_MEM_CAP_GB = 12.0
WORKER_NAME = "bench"
# Workload shape (see build_workload): tiny tensors, realistic op count per step.
LAYERS = 4
D_MODEL = 32
SEQ_LEN = 16
BATCH = 8
CLASSES = 10
# Stored with every trace: a trace recorded with another workload is re-recorded, not reused.
WORKLOAD = f"transformer-encoder L{LAYERS} d{D_MODEL} seq{SEQ_LEN} batch{BATCH}, Adam, torch CPU"


def cap_address_space(gigabytes: float) -> None:
    """Limit this process's virtual memory; torch raises MemoryError instead of eating the box."""
    limit = int(gigabytes * 1024**3)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def build_workload() -> tuple[Any, Any, Any, Any]:
    """A small transformer classifier's training step: DataLoader, encoder, loss, backward, Adam.

    torch is imported here, not at module level, so the harness can import this module's
    constants without loading torch.

    Dimensions are tiny so compute stays cheap, but the op structure is that of a real model:
    ~4,300 trace events (~1.7 MB of JSON) per step. That matters: the old plugin's overview
    costs grow with steps x ops-before-the-step (quadratic in the step count), so a toy step of
    a few hundred ops would need 8x more steps per MB and make it look far slower than on
    real traces.
    """
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    torch.set_num_threads(1)
    layer = nn.TransformerEncoderLayer(
        d_model=D_MODEL, nhead=4, dim_feedforward=2 * D_MODEL, batch_first=True
    )
    model = nn.Sequential(
        nn.TransformerEncoder(layer, num_layers=LAYERS, enable_nested_tensor=False),
        nn.Flatten(),
        nn.Linear(SEQ_LEN * D_MODEL, CLASSES),
    )
    inputs = torch.randn(256, SEQ_LEN, D_MODEL)
    data = TensorDataset(inputs, torch.randint(0, CLASSES, (256,)))
    loader = DataLoader(data, batch_size=BATCH, shuffle=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    return model, loader, optimizer, loss_fn


def batches(loader: Any) -> Iterator[Any]:
    """Endless batches, re-entering the DataLoader so its iterator events recur like in training."""
    while True:
        yield from loader


def record(out_dir: Path, steps: int) -> Path:
    """Profile ``steps`` active training steps (after 1 warmup step) and return the trace path."""
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    model, loader, optimizer, loss_fn = build_workload()
    out_dir.mkdir(parents=True, exist_ok=True)
    before = set(out_dir.glob("*.pt.trace.json"))
    data = batches(loader)
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        schedule=schedule(wait=0, warmup=1, active=steps, repeat=1),
        on_trace_ready=tensorboard_trace_handler(str(out_dir), worker_name=WORKER_NAME),
    ) as prof:
        for _ in range(steps + 1):
            x, y = next(data)
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            prof.step()
    created = sorted(set(out_dir.glob("*.pt.trace.json")) - before)
    if len(created) != 1:
        raise RuntimeError(f"expected one new trace in {out_dir}, found {created}")
    return created[0]


def main(argv: list[str] | None = None) -> int:
    """CLI entry: record one trace and print a JSON summary line for the parent process."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="run folder to write into")
    parser.add_argument("--steps", type=int, required=True, help="active profiler steps")
    parser.add_argument("--mem-cap-gb", type=float, default=DEFAULT_MEM_CAP_GB)
    args = parser.parse_args(argv)
    cap_address_space(args.mem_cap_gb)
    start = time.perf_counter()
    path = record(args.out, args.steps)
    summary = {
        "path": str(path),
        "steps": args.steps,
        "bytes": path.stat().st_size,
        "seconds": round(time.perf_counter() - start, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
