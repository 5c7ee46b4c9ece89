"""Module of a communication call (`distributed/modules.py`): the innermost module event on the
call's thread containing its start, half-open [start, end); nn.Module events and FSDP2 record
functions naming a module are module events, FSDP1's are not; the source names which were
found. Hand-built events, expected labels read off the intervals."""

from __future__ import annotations

import numpy as np

from tb_plugin.analysis.distributed.modules import call_modules, module_events, thread_keys

from .helpers import cpu_op, make_table


def _py(name: str, ts: float, dur: float, tid: int = 1) -> dict:
    return cpu_op(name, ts, dur, cat="python_function", tid=tid)


def test_innermost_module_on_the_same_thread(tmp_path) -> None:
    table = make_table([
        _py("nn.Module: Outer", 0, 100), _py("nn.Module: Inner", 10, 40),  # [10, 50)
        cpu_op("FSDP::pre_forward (layers.0) ", 60, 30, cat="user_annotation", tid=1),
        cpu_op("FullyShardedDataParallel.forward", 0, 100, cat="user_annotation", tid=1),
        _py("nn.Module: Other", 0, 100, tid=2),
    ], tmp_path)
    events = table.events
    names = events["name"].astype(str).to_numpy()
    rows, labels, source = module_events(table)
    assert sorted(zip(names[rows], labels)) == [
        ("FSDP::pre_forward (layers.0) ", "layers.0"), ("nn.Module: Inner", "Inner"),
        ("nn.Module: Other", "Other"), ("nn.Module: Outer", "Outer")]
    assert source == "nn.Module + FSDP annotations"
    a = int(thread_keys(events, np.flatnonzero(names == "nn.Module: Outer"))[0])
    b = int(thread_keys(events, np.flatnonzero(names == "nn.Module: Other"))[0])
    assert a != b
    threads = np.array([a, a, a, a, a, a, b, a])
    starts = np.array([20.0, 10.0, 50.0, 55.0, 70.0, 150.0, 20.0, 100.0])
    got, got_source = call_modules(table, threads, starts)
    assert got == ["Inner", "Inner", "Outer", "Outer", "layers.0", "", "Other", ""]
    assert got_source == source
    assert call_modules(table, np.array([], dtype=np.int64), np.array([])) == ([], source)


def test_sources_alone_and_none(tmp_path) -> None:
    nn_only = make_table([_py("nn.Module: A", 0, 10)], tmp_path)
    assert module_events(nn_only)[2] == "nn.Module"
    fsdp_only = make_table([cpu_op("FSDP::post_backward_reduce (layers.1)", 0, 10,
                                   cat="user_annotation")], tmp_path)
    assert module_events(fsdp_only)[1].tolist() == ["layers.1"]
    assert module_events(fsdp_only)[2] == "FSDP annotations"
    none = make_table([cpu_op("FullyShardedDataParallel.forward", 0, 10, cat="user_annotation"),
                       cpu_op("nn.Module", 0, 5)], tmp_path)
    rows, labels, source = module_events(none)
    assert (rows.size, source) == (0, "")
    assert call_modules(none, np.array([0]), np.array([1.0])) == ([""], "")
