"""The Python API on hostile files: a FIFO fails fast with a clear error (regular files only:
never opened for reading, so nothing blocks), and JSON nested too deeply to decode is an
`UnreadableTraceError` naming it, never a RecursionError."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tb_plugin.api import UnreadableTraceError, open_logdir, open_trace
from tb_plugin.ingest.parse import ends_mid_token, malformed
from tests.support import SAMPLES

REPO = Path(__file__).resolve().parents[1]
EVENT = ('{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 5, "pid": 1, "tid": 1, '
         '"args": {}}')


def wrapped(depth: int) -> str:
    """A trace inside `depth` nested objects: no top-level 'traceEvents'."""
    return '{"a": ' * depth + '{"traceEvents": [' + EVENT + ']}' + "}" * depth


@pytest.mark.parametrize("use_cache", [False, True])
def test_open_trace_on_a_fifo_fails_fast(tmp_path: Path, use_cache: bool) -> None:
    fifo = tmp_path / "w.1.pt.trace.json"
    os.mkfifo(fifo)
    # in a subprocess with a deadline, so that a regression hangs nothing but it
    probe = ("import sys\nfrom tb_plugin.api import UnreadableTraceError, open_trace\n"
             "try:\n"
             f"    open_trace(sys.argv[1], use_cache={use_cache}, cache_dir=sys.argv[2])\n"
             "except UnreadableTraceError as exc:\n    print(exc)\n")
    result = subprocess.run([sys.executable, "-c", probe, str(fifo), str(tmp_path / "c")],
                            capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "is not a regular file (a FIFO, device or socket)" in result.stdout


def test_a_fifo_in_a_logdir_is_skipped_and_the_rest_is_read(tmp_path: Path) -> None:
    run = tmp_path / "logs" / "run"
    run.mkdir(parents=True)
    sample = next((SAMPLES / "cnn_bs32").glob("*.pt.trace.json.gz"))
    (run / sample.name).write_bytes(sample.read_bytes())
    for name in ("w.1.pt.trace.json", "other.json", "w.1.raw.json.gz", "dump_snapshot.pkl"):
        os.mkfifo(run / name)
    logdir = open_logdir(str(tmp_path / "logs"), use_cache=False)
    assert logdir.workers("run") == ["vm_9710"]
    assert logdir.trace("run").status.state == "ok"


@pytest.mark.parametrize(("depth", "message"), [
    (500, "no 'traceEvents' array: this is JSON but not a Chrome trace"),
    (1100, "the JSON is nested too deeply to read, and has no 'traceEvents' array"),
    (200_000, "the JSON is nested too deeply to read, and has no 'traceEvents' array"),
])
@pytest.mark.parametrize("use_cache", [False, True])
def test_deep_nesting_is_a_clear_error(tmp_path: Path, depth: int, message: str,
                                       use_cache: bool) -> None:
    path = tmp_path / "deep.pt.trace.json"
    path.write_text(wrapped(depth))
    with pytest.raises(UnreadableTraceError, match=re.escape(message)):
        open_trace(str(path), use_cache=use_cache, cache_dir=tmp_path / "c")


def test_too_deep_json_is_broken_not_cut_off() -> None:
    deep = ("[" * 200_000 + "]" * 200_000).encode()
    assert not ends_mid_token(deep) and malformed(deep)
    shallow = ("[" * 500 + "]" * 500).encode()
    assert not ends_mid_token(shallow) and not malformed(shallow)
    assert ends_mid_token(shallow[:-1]) and not malformed(shallow[:-1])  # a prefix: cut off
