"""A real CPU training job that listens for capture requests (`Recorder(..., on_demand=True)`),
for the capture tests: one process, or a 2-rank gloo job (torch.distributed on 127.0.0.1
through a file rendezvous). The job trains until a `stop` file appears in its working folder
(checked at every step), then writes `result_<rank>.json` with every capture it finished.

Synchronisation is on files the job writes (its listener markers, its statuses, its log), never
on sleeps: `wait_for` polls an observable state.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support import REPO
from tests.support.processes import wait_for

JOB = textwrap.dedent(
    """
    import json, logging, os, sys, time
    import torch
    from torch import nn
    from tb_plugin.recorder import Recorder, listen

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, force=True)
    LOGDIR, RUN, RANKS, POLL_S = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    LISTEN = sys.argv[5] == "listen"  # tb_plugin.recorder.listen: no step() calls in the loop
    MAX_STEPS = 100_000  # a bound, should the test never write the stop file

    def train(rank):
        torch.manual_seed(0)
        torch.set_num_threads(1)
        model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
        if RANKS > 1:
            import torch.distributed as dist
            from torch.nn.parallel import DistributedDataParallel
            dist.init_process_group("gloo", init_method="file://" + os.path.abspath("rdv"),
                                    rank=rank, world_size=RANKS)
            model = DistributedDataParallel(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
        if LISTEN:
            rec = listen(LOGDIR, run=RUN, poll_s=POLL_S)
        else:
            rec = Recorder(LOGDIR, run=RUN, on_demand=True, poll_s=POLL_S)
        with rec:
            for step in range(MAX_STEPS):
                loss = nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                if not LISTEN:
                    rec.step()
                stop = os.path.exists("stop")
                if RANKS > 1:  # every rank stops at the same step (no collective left hanging)
                    flag = torch.tensor([float(stop)])
                    dist.all_reduce(flag)
                    stop = bool(flag.item())
                if stop:
                    break
                time.sleep(0.005)  # a gentle job on a shared machine; not synchronisation
        finished = [{"id": s.id, "state": s.state, "files": s.files, "step": s.step,
                     "notes": s.notes} for s in rec.watch.finished]
        # one file per rank, written whole then renamed: two ranks printing to one pipe could
        # interleave their lines
        result = {"rank": rank, "finished": finished}
        with open(f"result_{rank}.json.tmp", "w") as out:
            json.dump(result, out)
        os.replace(f"result_{rank}.json.tmp", f"result_{rank}.json")
        if RANKS > 1:
            dist.destroy_process_group()

    if __name__ == "__main__":
        if RANKS > 1:
            import torch.multiprocessing as mp
            mp.spawn(train, nprocs=RANKS)
        else:
            train(0)
    """
)


@dataclass
class Job:
    popen: subprocess.Popen
    cwd: Path
    run_dir: Path
    log: Path

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def listeners(self) -> list[Path]:
        return sorted(self.run_dir.glob(".torch-prof-listen.*"))

    def wait_listening(self, count: int = 1, timeout: float = 120) -> list[Path]:
        found = wait_for(lambda: self._alive() and len(self.listeners()) >= count, timeout)
        assert found, f"{count} listener(s) not up in {timeout} s:\n{self.stderr()[-3000:]}"
        return self.listeners()

    def wait_log(self, text: str, timeout: float = 60) -> None:
        found = wait_for(lambda: self._alive() and text in self.stderr(), timeout)
        assert found, f"no {text!r} in the job's log within {timeout} s:\n{self.stderr()[-3000:]}"

    def statuses(self, request_id: str) -> list[dict[str, Any]]:
        found = []
        for path in sorted(self.run_dir.glob(f".torch-prof-capture.{request_id}.*.status")):
            with contextlib.suppress(OSError, ValueError):
                found.append(json.loads(path.read_text()))
        return found

    def wait_for_state(self, request_id: str, state: str, timeout: float = 120
                       ) -> dict[str, Any]:
        """The first status of this request seen in `state` (one worker)."""
        def seen() -> dict[str, Any]:
            self._alive()
            return next((s for s in self.statuses(request_id) if s["state"] == state), {})

        found = wait_for(seen, timeout)
        assert found, f"request {request_id} never {state}: {self.statuses(request_id)}"
        return found

    def wait_written(self, request_id: str, workers: int = 1, timeout: float = 120
                     ) -> list[dict[str, Any]]:
        def done() -> list[dict[str, Any]]:
            found = self.statuses(request_id)
            ended = [s for s in found if s["state"] in ("written", "failed")]
            return found if self._alive() and len(ended) >= workers else []

        found = wait_for(done, timeout)
        assert found, (f"request {request_id} not answered by {workers} worker(s) in {timeout}"
                       f" s: {self.statuses(request_id)}\n{self.stderr()[-3000:]}")
        return found

    def _alive(self) -> bool:
        if self.popen.poll() is not None:
            raise AssertionError(f"the job exited ({self.popen.returncode}):\n"
                                 f"{self.stderr()[-3000:]}")
        return True

    def stop(self, timeout: float = 120) -> list[dict[str, Any]]:
        """Write the stop file, wait for the job; its results (one per rank, by rank)."""
        (self.cwd / "stop").touch()
        self.popen.communicate(timeout=timeout)
        assert self.popen.returncode == 0, f"job failed:\n{self.stderr()[-3000:]}"
        return [json.loads(path.read_text())
                for path in sorted(self.cwd.glob("result_*.json"))]


@contextlib.contextmanager
def running_job(cwd: Path, logdir: Path, run: str, ranks: int = 1, poll_s: float = 0.05,
                mode: str = "recorder") -> Iterator[Job]:
    """The job; `mode` "listen" uses `tb_plugin.recorder.listen` instead of `Recorder.step()`."""
    script = cwd / "job.py"
    script.write_text(JOB)
    log = cwd / "job.log"
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    with open(log, "wb") as log_file:
        popen = subprocess.Popen(
            [sys.executable, str(script), str(logdir), run, str(ranks), str(poll_s), mode],
            cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=log_file, text=True)
    job = Job(popen, cwd, logdir / run, log)
    try:
        yield job
    finally:
        if popen.poll() is None:
            (cwd / "stop").touch()
            try:
                popen.wait(60)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait(10)
