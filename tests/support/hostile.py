"""Crafted hostile files (issue 19), written into a test's tmp_path; and how to run the CLI as
a real process while measuring its peak memory.

Bombs are built from one compressed block of filler written many times as gzip members
(`cat a.gz b.gz` is valid gzip): a few MB on disk inflate to gigabytes in a fraction of a
second of writing.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from isal import igzip

from . import REPO

#: One complete event (a CPU op); `% ts`.
EVENT = b'{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":%d,"dur":5}'
GOOD_EVENTS = 100
BLOCK = 64 << 20  # inflated bytes of one bomb member


def events(first: int, last: int) -> bytes:
    return b",".join(EVENT % ts for ts in range(first, last))


def write_bomb(path: Path, head: bytes, filler: bytes, tail: bytes, inflated_gb: float) -> Path:
    """`head` + `filler` repeated to about `inflated_gb` GB + `tail`, gzipped (multi-member)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    block = igzip.compress(filler * (BLOCK // len(filler)), 1)
    with open(path, "wb") as out:
        out.write(gzip.compress(head))
        for _ in range(int(inflated_gb * (1 << 30)) // BLOCK):
            out.write(block)
        out.write(gzip.compress(tail))
    return path


def whitespace_bomb(path: Path, inflated_gb: float) -> Path:
    """100 good events, then gigabytes of spaces inside the events array, then its end."""
    return write_bomb(path, b'{"traceEvents":[' + events(0, GOOD_EVENTS) + b",", b" ", b"]}",
                      inflated_gb)


def string_bomb(path: Path, inflated_gb: float) -> Path:
    """100 good events, then one event whose name is gigabytes long."""
    return write_bomb(path, b'{"traceEvents":[' + events(0, GOOD_EVENTS) + b',{"name":"', b"a",
                      b'","ph":"i","ts":1}]}', inflated_gb)


def leading_whitespace_bomb(path: Path, inflated_gb: float) -> Path:
    """Gigabytes of spaces before the document (an empty trace)."""
    return write_bomb(path, b"", b" ", b'{"traceEvents":[]}', inflated_gb)


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def deep(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def gpu_only_trace() -> dict[str, Any]:
    """Runtime launches and their kernels, no CPU operator at all (item 11)."""
    trace_events: list[dict[str, Any]] = []
    for i in range(6):
        trace_events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                             "pid": 1, "tid": 1, "ts": 100 + i * 100, "dur": 10,
                             "args": {"correlation": i + 1, "external id": i + 7}})
        trace_events.append({"ph": "X", "cat": "kernel", "name": f"k{i % 2}", "pid": 0,
                             "tid": 7, "ts": 105 + i * 100, "dur": 50,
                             "args": {"correlation": i + 1, "external id": i + 7, "device": 0,
                                      "stream": 7, "grid": [1, 1, 1], "block": [128, 1, 1]}})
    return {"schemaVersion": 1, "traceEvents": trace_events}


def write_json(path: Path, document: Any) -> Path:
    return write(path, json.dumps(document).encode())


@dataclass
class CliRun:
    returncode: int
    stdout: str
    stderr: str
    peak_rss: int  # bytes: the CLI process's maximum resident set (getrusage of the child)


#: Started by the test process, it starts the CLI and reports the CLI's wait4 peak RSS. Linux
#: carries a process's peak RSS over exec from the memory it was forked (or vforked) with, so
#: a CLI started by pytest directly would report pytest's own size (hundreds of MB late in a
#: full run); started by this small interpreter it reports only its own.
_MEASURE = """
import os, signal, subprocess, sys
process = subprocess.Popen([sys.executable, "-m", "tb_plugin", *sys.argv[2:]])
_, status, usage = os.wait4(process.pid, 0)
with open(sys.argv[1], "w") as report:
    report.write(str(usage.ru_maxrss * 1024))
code = os.waitstatus_to_exitcode(status)
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"""


def run_cli(*args: str, env: Optional[dict[str, str]] = None) -> CliRun:
    """`python -m tb_plugin ARGS` as a real process; its peak RSS from wait4's rusage (the
    process itself, not its children: run with TORCH_PROF_PARSE_PROCESSES=1 to count all),
    measured by a small parent (`_MEASURE`), not by the test process."""
    environment = dict(os.environ, PYTHONPATH=str(REPO), **(env or {}))
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "peak_rss"
        process = subprocess.run([sys.executable, "-c", _MEASURE, str(report), *args],
                                 cwd=REPO, env=environment, stdout=out, stderr=err)
        out.seek(0)
        err.seek(0)
        return CliRun(process.returncode, out.read().decode(), err.read().decode(),
                      int(report.read_text()))
