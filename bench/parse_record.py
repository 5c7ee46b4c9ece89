"""Record the real traces `bench/parse_bench.py` parses: our recorder, the samples' CNN.

    python bench/parse_record.py --out /tmp/parse-bench/traces --mb 50 200 800

Each size is one run recorded with `tb_plugin.recorder.Recorder` exactly as a user records
(record_shapes, profile_memory, with_stack, with_modules: the recorder's defaults) around the
training loop of `samples/make_samples.py` (SmallCNN, synthetic images, SGD, torch CPU), one
span of as many steps as reach the size. The steps per MB are measured on a short first span,
so a size lands within ~10% of the asked MB (uncompressed JSON). Run in a child process per
size: Kineto keeps every event in memory until the export. Recorded once into a cache folder
outside the repository (the traces are not committed); an existing size is kept.
"""

from __future__ import annotations

import argparse
import gzip
import sys
from pathlib import Path

import torch
from torch.utils.data import DataLoader

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run from a checkout without installing

from samples.make_samples import SEED, SmallCNN, SyntheticImages  # noqa: E402
from tb_plugin.recorder import Recorder  # noqa: E402


def record(out: Path, run: str, steps: int) -> Path:
    """One span of `steps` training steps into out/run; the trace's path."""
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    loader = DataLoader(SyntheticImages(size=32 * (steps + 2)), batch_size=32,
                        generator=torch.Generator().manual_seed(SEED))
    model = SmallCNN()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    with Recorder(out, run=run, worker="bench", wait=1, warmup=1, active=steps, repeat=1) as rec:
        for step, (images, labels) in enumerate(loader):
            loss = loss_fn(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            rec.step()
            if step + 1 >= steps + 2:
                break
    return Path(rec.written[0])


def json_mb(path: Path) -> float:
    with gzip.open(path, "rb") as handle:
        size = 0
        while chunk := handle.read(1 << 24):
            size += len(chunk)
    return size / 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/parse-bench/traces"))
    parser.add_argument("--mb", type=int, nargs="+", default=[50, 200, 800])
    args = parser.parse_args()
    probe = record(args.out, "probe", 4)
    per_step = json_mb(probe) / 4
    print(f"probe: {per_step:.2f} MB of JSON per step")
    for mb in args.mb:
        run = f"cnn_{mb}mb"
        if any((args.out / run).glob("*.pt.trace.json.gz")):
            print(f"{run}: kept")
            continue
        path = record(args.out, run, max(1, round(mb / per_step)))
        print(f"{run}: {path} {json_mb(path):.0f} MB of JSON")
    return 0


if __name__ == "__main__":
    sys.exit(main())
