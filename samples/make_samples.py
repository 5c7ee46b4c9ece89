"""Regenerate the sample runs in samples/ with tb_plugin.recorder (CPU only).

    .venv/bin/python samples/make_samples.py              # all three runs, then a summary
    .venv/bin/python samples/make_samples.py --summary    # only describe the files present

Runs (each a folder under samples/, one trace per worker per span):

* ``cnn_bs32``: one process, a small CNN on synthetic 3x32x32 images, DataLoader with 2
  worker processes, SGD; shapes, memory, stacks and modules recorded; schedule
  wait=1 warmup=1 active=2 repeat=2 (two spans); plus the raw memory timeline per span.
* ``cnn_bs64``: the same with batch size 64 (everything else equal), for the diff view.
* ``ddp_gloo``: 2 processes (``torch.multiprocessing.spawn``), DistributedDataParallel on
  the gloo backend over 127.0.0.1, DistributedSampler, DataLoader with 1 worker each, small
  DDP buckets so two all_reduce calls per step overlap the backward pass; no memory timeline
  (so readers also see a run without ``.raw.json.gz`` files).
* ``compiled_cpu``: a small MLP under ``torch.compile`` (Inductor, CPU), its C++ kernels
  recorded as ops (``config.cpp.enable_kernel_profile``) with stacks and ``with_flops``, so
  every kernel shows its compiled region and the generated source file; one span of 2 steps.

Model, data and sampling order are seeded; timings, pids, host name and file timestamps are
of course not reproducible. Takes about 10 s on an idle 2-core machine, ~30 s when the cores
are busy (most of it starting DataLoader workers and the spawned DDP processes).
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset, DistributedSampler

SAMPLES = Path(__file__).resolve().parent
sys.path.insert(0, str(SAMPLES.parent))  # run from a checkout without installing

from tb_plugin.recorder import MEMORY_SUFFIX, TRACE_SUFFIX, Recorder  # noqa: E402

SEED = 1234
SCHEDULE = {"wait": 1, "warmup": 1, "active": 2, "repeat": 2}
STEPS = 8  # = repeat * (wait + warmup + active): the loop ends right after span 2
RUNS = ("cnn_bs32", "cnn_bs64", "ddp_gloo", "compiled_cpu")


class SyntheticImages(Dataset):
    """CIFAR-shaped random images; item i is the same in every run and worker."""

    def __init__(self, size: int = 4096, classes: int = 10) -> None:
        self.size = size
        self.classes = classes

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        gen = torch.Generator().manual_seed(SEED * 100_003 + index)
        image = torch.randn(3, 32, 32, generator=gen)
        label = int(torch.randint(self.classes, (1,), generator=gen))
        return image, label


class SmallCNN(nn.Module):
    """Three conv blocks and a linear head (~25k parameters): realistic op mix, tiny traces."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            _block(3, 16),
            _block(16, 32),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1),
        )
        self.classifier = nn.Sequential(nn.Flatten(), nn.Dropout(0.1), nn.Linear(64, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


def _block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(2),
    )


def train(model: nn.Module, loader: DataLoader, rec: Recorder) -> None:
    """The usual loop; `rec.step()` is the only profiler line in it."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    for step, (images, labels) in enumerate(loader):
        loss = loss_fn(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        rec.step()
        if step + 1 >= STEPS:
            break


def run_single(batch_size: int, out: Path) -> None:
    """One process, DataLoader with 2 workers, raw memory timeline on."""
    torch.manual_seed(SEED)
    loader = DataLoader(
        SyntheticImages(),
        batch_size=batch_size,
        shuffle=True,
        num_workers=2,
        generator=torch.Generator().manual_seed(SEED),
    )
    with Recorder(out, run=f"cnn_bs{batch_size}", memory_timeline=True, **SCHEDULE) as rec:
        train(SmallCNN(), loader, rec)


def ddp_worker(rank: int, world_size: int, port: int, out: str) -> None:
    """One rank of the gloo DDP run (target of torch.multiprocessing.spawn)."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)  # 2 ranks on 2 cores
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        torch.manual_seed(SEED)  # same init on all ranks (DDP broadcasts rank 0's anyway)
        dataset = SyntheticImages()
        sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, seed=SEED)
        loader = DataLoader(dataset, batch_size=32, sampler=sampler, num_workers=1)
        # Small buckets: 2 all_reduce calls per step, the first overlapping the backward pass.
        model = DistributedDataParallel(SmallCNN(), bucket_cap_mb=0.02)
        with Recorder(out, run="ddp_gloo", **SCHEDULE) as rec:
            train(model, loader, rec)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def run_ddp(out: Path, world_size: int = 2) -> None:
    mp.spawn(ddp_worker, args=(world_size, _free_port(), str(out)), nprocs=world_size)


def run_compiled(out: Path) -> None:
    """torch.compile on CPU: Inductor's C++ kernels recorded as ops (one span, 2 steps)."""
    import torch._inductor.config as inductor_config  # noqa: PLC0415 (only this run needs it)

    inductor_config.cpp.enable_kernel_profile = True  # RECORD_FUNCTION around each kernel
    torch.manual_seed(SEED)
    model = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.LayerNorm(128), nn.Linear(128, 10))
    compiled = torch.compile(model)
    x = torch.randn(32, 64)
    for _ in range(2):  # compile and warm up outside the profiled steps
        compiled(x).sum().backward()
    with Recorder(out, run="compiled_cpu", wait=0, warmup=1, active=2, repeat=1,
                  with_flops=True) as rec:
        for _ in range(3):
            compiled(x).sum().backward()
            rec.step()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def clean(run_dir: Path) -> None:
    """Remove a previous generation's files (only ours), so spans never mix."""
    for path in run_dir.glob("*"):
        if path.name.endswith((TRACE_SUFFIX, MEMORY_SUFFIX, ".partial")):
            path.unlink()


# -- summary -------------------------------------------------------------------------------


def describe_trace(path: Path) -> dict[str, Any]:
    """Counts of what a trace holds: categories and the markers the plugin's views rely on."""
    with gzip.open(path, "rt") as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    cats = collections.Counter(e.get("cat") or f"<{e.get('ph')}>" for e in events)
    names = [e.get("name", "") for e in events]
    markers = {
        "ProfilerStep#": sum(n.startswith("ProfilerStep#") for n in names),
        "enumerate(DataLoader)": sum(n.startswith("enumerate(DataLoader)") for n in names),
        "Optimizer.step": sum(n.startswith("Optimizer.step") for n in names),
        "nn.Module": sum(n.startswith("nn.Module: ") for n in names),
        "[memory]": names.count("[memory]"),
        "fwdbwd s/f": sum(e.get("cat") == "fwdbwd" for e in events),
        "gloo:*": sum(n.startswith("gloo:") for n in names),
        "record_param_comms": names.count("record_param_comms"),
    }
    return {
        "events": len(events),
        "cats": dict(cats.most_common()),
        "markers": markers,
        "distributedInfo": trace.get("distributedInfo"),
    }


def summarize(root: Path) -> int:
    """Print what each run folder holds; returns the total size in bytes."""
    total = 0
    for run in RUNS:
        for path in sorted((root / run).glob("*.gz")):
            size = path.stat().st_size
            total += size
            print(f"{run}/{path.name}  {size / 1024:.0f} KiB")
            if path.name.endswith(TRACE_SUFFIX):
                info = describe_trace(path)
                print(f"    events={info['events']} distributedInfo={info['distributedInfo']}")
                print(f"    categories: {info['cats']}")
                print(f"    markers:    {info['markers']}")
            else:
                with gzip.open(path, "rt") as f:
                    records = json.load(f)
                actions = collections.Counter(r[1] for r in records)
                print(
                    f"    memory records={len(records)} by action={dict(sorted(actions.items()))}"
                )
    print(f"total {total / 2**20:.2f} MiB")
    return total


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=SAMPLES, help="log dir (default: samples/)")
    parser.add_argument("--summary", action="store_true", help="only summarize existing files")
    parser.add_argument("--only", choices=RUNS, help="regenerate this run only")
    args = parser.parse_args(argv)
    if not args.summary:
        started = time.perf_counter()
        makers = {"cnn_bs32": lambda: run_single(32, args.out),
                  "cnn_bs64": lambda: run_single(64, args.out),
                  "ddp_gloo": lambda: run_ddp(args.out),
                  "compiled_cpu": lambda: run_compiled(args.out)}
        for run in [args.only] if args.only else RUNS:
            clean(args.out / run)
            makers[run]()
        print(f"recorded in {time.perf_counter() - started:.1f} s")
    summarize(args.out)


if __name__ == "__main__":
    main()
