"""The parse reads arguments whatever order their keys come in (decode.Args lists its fields in
Kineto's order only for speed), and picks rows of one kind right when a batch has one of them."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pandas as pd

from tb_plugin.ingest import LoadState
from tb_plugin.load import load_trace

OP_ARGS = {"External id": 5, "Sequence number": 3, "Fwd thread id": 0, "Record function id": 0,
           "Concrete Inputs": ["", "1"], "Input type": ["float", "Scalar"],
           "Input Strides": [[4, 1], []], "Input Dims": [[2, 4], []], "Ev Idx": 9}
KERNEL_ARGS = {"External id": 5, "queued": 0, "device": 0, "context": 1, "stream": 7,
               "correlation": 44, "registers per thread": 32, "shared memory": 0,
               "blocks per SM": 0.25, "warps per SM": 1.5, "grid": [2, 1, 1],
               "block": [64, 1, 1], "est. achieved occupancy %": 12}
MEMORY_ARGS = {"Total Reserved": 4096, "Total Allocated": 1024, "Bytes": 512, "Device Id": 0,
               "Device Type": 0, "Addr": 77, "finished": False, "Ev Idx": 10}
PYTHON_ARGS = {"Python parent id": 1, "Python id": 2, "Python module id": 6, "Ev Idx": 11}


def _events(order: Any) -> list[dict[str, Any]]:
    def args(a: dict[str, Any]) -> dict[str, Any]:
        return dict(order(list(a.items())))
    return [
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 10,
         "dur": 5, "args": args(OP_ARGS)},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 12, "dur": 1,
         "args": args(KERNEL_ARGS)},
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1,
         "ts": 11, "s": "t", "args": args(MEMORY_ARGS)},
        {"ph": "X", "cat": "python_function", "name": "a.py(1): f", "pid": 1, "tid": 1,
         "ts": 9, "dur": 8, "args": args(PYTHON_ARGS)},
        # older Kineto: "external id"; read only where "External id" is missing
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": 11.5, "dur": 1, "args": {"external id": 8, "correlation": 44}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": 13, "dur": 1, "args": {"External id": 6, "external id": 99}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpy", "pid": 1, "tid": 1,
         "ts": 14, "dur": 1, "args": {}},
        # some 1.x builds: "Input dims"; read only where "Input Dims" is missing
        {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": 15,
         "dur": 1, "args": args({"Input dims": [[3]], "External id": 9})},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": 16,
         "dur": 1, "args": args({"Input Dims": [[4]], "Input dims": [[5]]})},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": 17,
         "dur": 1, "args": {}},
    ]


def _parse(tmp_path: Path, order: Any) -> Any:
    path = tmp_path / "w.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": _events(order)}))
    table = load_trace(str(path), use_cache=False, processes=1)
    assert table.status.state == LoadState.OK
    return table


def _columns(table: Any) -> dict[str, Any]:
    """Every value read, NaN as None (NaN != NaN would hide nothing but fail equality)."""
    def clean(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: None if isinstance(v, float) and math.isnan(v) else v
                 for k, v in row.items()} for row in records]
    return {name: clean(frame.astype(object).to_dict("records"))
            for name, frame in table.tables().items()}


def test_keys_in_any_order_read_the_same(tmp_path: Path) -> None:
    kineto = _columns(_parse(tmp_path, lambda items: items))
    shuffled = random.Random(7)
    for order in (lambda items: items[::-1],
                  lambda items: shuffled.sample(items, len(items))):
        assert _columns(_parse(tmp_path, order)) == kineto


def test_values_of_each_kind(tmp_path: Path) -> None:
    table = _parse(tmp_path, lambda items: items[::-1])
    events = table.events
    assert events["name"].tolist() == ["aten::add", "k", "a.py(1): f", "cudaLaunchKernel",
                                       "cudaLaunchKernel", "cudaMemcpy", "aten::mul",
                                       "aten::mul", "aten::mul"]
    # "External id" wins over "external id"; either alone is read; neither: NaN
    external = events["external_id"].fillna(-1).tolist()
    assert external == [5, 5, -1, 8, 6, -1, 9, -1, -1]
    # "Input Dims" wins over "Input dims"; either alone is read; neither: missing
    assert table.op_args["event"].tolist() == [0, 6, 7, 8]
    assert table.op_args["input_dims"].astype(object).fillna("-").tolist() == [
        "[[2, 4], []]", "[[3]]", "[[4]]", "-"]
    op = table.op_args.iloc[0]
    assert (op["event"], op["input_dims"], op["input_types"], op["sequence_number"],
            op["fwd_thread_id"]) == (0, "[[2, 4], []]", "['float', 'Scalar']", 3, 0)
    kernel = table.device_args.iloc[0]
    assert (kernel["event"], kernel["stream"], kernel["grid"], kernel["block"],
            kernel["registers_per_thread"], kernel["blocks_per_sm"], kernel["warps_per_sm"],
            kernel["occupancy"]) == (1, 7, "[2, 1, 1]", "[64, 1, 1]", 32, 0.25, 1.5, 12)
    memory = table.memory.iloc[0]
    assert (memory["ts"], memory["addr"], memory["bytes"], memory["total_allocated"],
            memory["total_reserved"], memory["device_type"], memory["device_id"]
            ) == (11, 77, 512, 1024, 4096, 0, 0)
    python = table.python_args.iloc[0]
    assert (python["event"], python["python_id"], python["python_parent_id"],
            python["python_module_id"]) == (2, 2, 1, 6)


def _ops_table(tmp_path: Path, extra: list[dict[str, Any]]) -> Any:
    """Four cpu_ops (no rare argument) and a python_function, then `extra` args on new ops."""
    plain = [{"ph": "X", "cat": "cpu_op", "name": f"aten::op{i}", "pid": 1, "tid": 1,
              "ts": 10 + i, "dur": 1, "args": {"External id": i}} for i in range(4)]
    python = {"ph": "X", "cat": "python_function", "name": "a.py(1): f", "pid": 1, "tid": 1,
              "ts": 9, "dur": 20, "args": {"Python id": 1}}
    ops = [{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1,
            "ts": 20 + i, "dur": 1, "args": args} for i, args in enumerate(extra)]
    path = tmp_path / "w.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": [python, *plain, *ops]}))
    table = load_trace(str(path), use_cache=False, processes=1)
    assert table.status.state == LoadState.OK
    return table


RARE_OP_ARGS = {"collective": ("Collective name", "allreduce"),
                "in_msg_nelems": ("In msg nelems", 1024), "out_msg_nelems": ("Out msg nelems", 512),
                "group_size": ("Group size", 8), "dtype": ("dtype", "Float"),
                "process_group": ("Process Group Name", "0"), "seq": ("Seq", 3),
                "flops": ("flops", 4096.0), "kernel_file": ("kernel_file", "/tmp/k.py")}


def test_rare_op_arguments_read_where_one_op_carries_one(tmp_path: Path) -> None:
    """The rare op arguments are read as one group: one op carrying one of them is enough for
    every one to be read, each in its own row; where no op carries any, all are missing."""
    for column, (key, value) in RARE_OP_ARGS.items():
        table = _ops_table(tmp_path, [{key: value}, {}])
        values = table.op_args[column].astype(object).tolist()
        assert [i for i, v in enumerate(values) if pd.isna(v)] == [0, 1, 2, 3, 5], column
        assert values[4] == value, column
        for other in RARE_OP_ARGS.keys() - {column}:
            assert table.op_args[other].isna().all(), (column, other)
    table = _ops_table(tmp_path, [{}])
    for column in RARE_OP_ARGS:
        assert table.op_args[column].isna().all(), column
    assert table.events["correlation"].isna().all()


def test_correlation_and_lowercase_external_id_where_one_event_carries_them(
        tmp_path: Path) -> None:
    """`correlation` and "external id" are read as one group: one event carrying one of them
    puts it in its own row only ("External id" still wins where both are there)."""
    table = _ops_table(tmp_path, [{"correlation": 7}])
    assert table.events["correlation"].fillna(-1).tolist() == [-1] * 5 + [7]
    table = _ops_table(tmp_path, [{"external id": 40}, {"external id": 41, "External id": 9}])
    assert table.events["external_id"].fillna(-1).tolist() == [-1, 0, 1, 2, 3, 40, 9]
    assert table.events["correlation"].isna().all()
