"""The local worker pool (tb_plugin/workers.py): real child processes, real pipes.

What the server and the CLI rely on: results and exceptions come back (arrays out of band,
bit for bit), progress reaches the parent's queue, a worker imports neither TensorBoard nor
the parent's `__main__`, a killed worker fails its call with its exit code and breaks the pool
while another worker's call still finishes, and shutdown/kill leave no process behind.
"""

from __future__ import annotations

import io
import os
import queue
import signal
import sys
import threading
from concurrent.futures import wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import numpy as np
import pytest

from tb_plugin.ingest.plain import from_plain
from tb_plugin.load import load_trace
from tb_plugin.server.parse_child import init_child, parse_file
from tb_plugin.storage import open_ref
from tb_plugin.workers import WORKER_NAME, WorkerDied, WorkerPool, encode, recv, write
from tests.ingest.tables import assert_same_table
from tests.support import SAMPLES

SAMPLE = sorted((SAMPLES / "cnn_bs32").glob("*.pt.trace.json.gz"))[0]


# Module-level functions: what a worker runs is pickled by reference, like the parser's.

def _echo(value):
    return value


def _fail(message: str) -> None:
    raise KeyError(message)


def _unpicklable_result():
    return threading.Lock()


def _kill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _wait_for(fifo: str) -> str:
    """Block until the test opens `fifo` for writing (a barrier, not a sleep)."""
    with open(fifo) as handle:
        return handle.read()


def _progress(items: list) -> int:
    relay = _RELAY["queue"]
    for item in items:
        relay.put_nowait(item)
    return len(items)


_RELAY: dict = {}


def _keep_relay(relay) -> None:
    _RELAY["queue"] = relay


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def test_messages_round_trip_arrays_bit_for_bit() -> None:
    arrays = {"f": np.array([1.5, np.nan, -0.0, np.inf]), "i": np.arange(10**6, dtype=np.int64),
              "s": np.array(["a", "bé"], dtype=object), "empty": np.zeros(0, dtype=np.int32)}
    stream = io.BytesIO()
    write(stream, encode(("result", arrays)))
    stream.seek(0)
    kind, back = recv(stream)
    assert kind == "result" and back.keys() == arrays.keys()
    for name, array in arrays.items():
        assert back[name].dtype == array.dtype
        np.testing.assert_array_equal(back[name], array)
    assert back["i"].flags.writeable  # read into a buffer of its own, not a view of bytes
    with pytest.raises(EOFError):
        recv(io.BytesIO(stream.getvalue()[:-5]))  # cut short: the writer died mid-message


def test_a_worker_parses_a_file_as_the_server_does(tmp_path: Path) -> None:
    progress: queue.SimpleQueue = queue.SimpleQueue()
    pool = WorkerPool(1, initializer=init_child, initargs=(progress,))
    try:
        ref = open_ref(str(SAMPLE))
        parsed = pool.submit(parse_file, "key", ref, str(tmp_path / "cache"), 1).result(120)
        assert_same_table(load_trace(str(SAMPLE), use_cache=False), from_plain(parsed.table))
        # the worker imported the parser, not TensorBoard, not the views, not the test module
        modules = pool.submit(eval, "sorted(__import__('sys').modules)").result(60)
    finally:
        pool.shutdown(wait=True)
    assert "tb_plugin.server.parse_child" in modules
    assert not [m for m in modules if m.startswith(("tensorboard", "tb_plugin.views",
                                                    "tests", "pytest"))]


def test_results_exceptions_and_progress_come_back() -> None:
    relayed: queue.SimpleQueue = queue.SimpleQueue()
    pool = WorkerPool(2, initializer=_keep_relay, initargs=(relayed,))
    try:
        assert pool.submit(_echo, {"x": [1, 2]}).result(60) == {"x": [1, 2]}
        with pytest.raises(KeyError, match="no such view") as raised:
            pool.submit(_fail, "no such view").result(60)
        assert "in the worker process" in "".join(getattr(raised.value, "__notes__", [""]))
        with pytest.raises(TypeError, match="pickle"):  # a result that cannot be pickled
            pool.submit(_unpicklable_result).result(60)
        with pytest.raises(TypeError):  # a call that cannot be pickled fails here, not there
            pool.submit(_echo, threading.Lock()).result(60)
        assert pool.submit(_progress, [("a", 0.25), ("a", 0.5)]).result(60) == 2
        assert [relayed.get_nowait(), relayed.get_nowait()] == [("a", 0.25), ("a", 0.5)]
        assert pool.submit(_echo, 7).result(60) == 7  # the pool survived all of that
    finally:
        pool.shutdown(wait=True)
    assert all(process.poll() == 0 for process in pool.processes())


def test_a_call_the_worker_cannot_import_fails_alone(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    pool = WorkerPool(1)
    try:
        assert pool.submit(_echo, 1).result(60) == 1  # the worker runs, with today's sys.path
        (tmp_path / "only_here.py").write_text("def hello():\n    return 'hi'\n")
        monkeypatch.syspath_prepend(str(tmp_path))
        import only_here  # noqa: PLC0415 - a module the worker cannot see
        assert only_here.hello() == "hi"
        with pytest.raises(ModuleNotFoundError, match="only_here"):
            pool.submit(only_here.hello).result(60)
        assert pool.submit(_echo, 2).result(60) == 2  # the channel is still in step
    finally:
        pool.shutdown(wait=True)


def test_an_initializer_that_fails_ends_the_worker_with_its_exit_code() -> None:
    pool = WorkerPool(1, initializer=_fail, initargs=("broken initializer",))
    try:
        with pytest.raises(WorkerDied) as died:
            pool.submit(_echo, 1).result(60)
        assert died.value.exitcode == 1
    finally:
        pool.kill()


def test_no_interpreter_to_start_is_a_clear_error(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))
    pool = WorkerPool(1)
    with pytest.raises(WorkerDied, match="cannot start a worker process.*no-python"):
        pool.submit(_echo, 1)
    assert pool.processes() == []


def test_a_killed_worker_breaks_the_pool_but_not_the_other_call(tmp_path: Path) -> None:
    pool = WorkerPool(2)
    barrier = tmp_path / "go"
    os.mkfifo(barrier)
    try:
        other = pool.submit(_wait_for, str(barrier))
        doomed = pool.submit(_kill_self)
        with pytest.raises(WorkerDied) as died:
            doomed.result(60)
        assert died.value.exitcode == -signal.SIGKILL
        assert isinstance(died.value, BrokenProcessPool)
        with pytest.raises(BrokenProcessPool):
            pool.submit(_echo, 1)
        with open(barrier, "w") as handle:
            handle.write("done")
        assert other.result(60) == "done"
    finally:
        pool.kill()
    assert all(_gone(process.pid) for process in pool.processes())


def test_kill_stops_running_calls_and_leaves_no_process(tmp_path: Path) -> None:
    pool = WorkerPool(2)
    os.mkfifo(tmp_path / "never")  # opened by nobody: the calls block until killed
    calls = [pool.submit(_wait_for, str(tmp_path / "never")) for _ in range(3)]
    processes = pool.processes()
    assert len(processes) == 2
    assert all(WORKER_NAME in " ".join(process.args) for process in processes)
    pool.kill()
    wait(calls, timeout=60)
    assert all(call.done() for call in calls)
    assert all(_gone(process.pid) for process in processes)
