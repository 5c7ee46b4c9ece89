"""Message sizes of communication events (`distributed/comm_bytes.py`) on hand-built calls:
numel x element size summed over tensor inputs (scalars and tensor lists count 0), the
record_param_comms element count x dtype size when the shapes give nothing, NaN for unknown or
zero sizes, and the two messages (unknown element types; shapes without types)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tb_plugin.analysis.distributed.comm_bytes import comm_bytes

from .helpers import cpu_op, make_table


def _call(i: int, **args: Any) -> dict[str, Any]:
    return cpu_op(f"nccl:all_reduce_{i}", 10.0 * i, 5, ext=i + 1, **args)


def test_bytes_per_call_and_messages(tmp_path) -> None:
    calls = [
        # 6 x 4 + 4 x 2 = 32
        _call(0, **{"Input Dims": [[2, 3], [4]], "Input type": ["float", "c10::Half"]}),
        # the scalar and the tensor list count nothing: 3 x 8 = 24
        _call(1, **{"Input Dims": [[3], [], [[1], [2]]],
                    "Input type": ["double", "Scalar", "TensorList"]}),
        # an unknown element type counts 0: only 5 x 1
        _call(2, **{"Input Dims": [[7], [5]], "Input type": ["weird", "bool"]}),
        # shapes without types count 0, then record_param_comms: 10 x 8 (Long) = 80
        _call(3, **{"Input Dims": [[4]], "In msg nelems": 10, "dtype": "Long"}),
        # no shapes: 6 x 2 (BFloat16) = 12
        _call(4, **{"In msg nelems": 6, "dtype": "BFloat16"}),
        # an empty tensor: 0 bytes -> NaN; nothing known -> NaN
        _call(5, **{"Input Dims": [[0, 3]], "Input type": ["float"]}),
        _call(6),
        # fewer types than shapes: the shape without a type counts 0: 2 x 4 = 8
        _call(7, **{"Input Dims": [[2], [9]], "Input type": ["Int"]}),
        # the same pair as call 0 again: 32
        _call(8, **{"Input Dims": [[2, 3], [4]], "Input type": ["float", "c10::Half"]}),
    ]
    table = make_table(calls, tmp_path)
    names = table.events["name"].astype(str).to_numpy()
    rows = np.array([int(np.flatnonzero(names == f"nccl:all_reduce_{i}")[0]) for i in range(9)])
    messages: list[str] = []
    got = comm_bytes(table, rows, messages)
    np.testing.assert_array_equal(got, [32.0, 24.0, 5.0, 80.0, 12.0, np.nan, np.nan, 8.0, 32.0])
    assert messages == [
        "Unknown element type(s) counted as 0 bytes: weird.",
        "1 distinct communication input shape(s) have no input types; their size counts as 0 "
        "bytes."]


def test_no_op_arguments_give_nan(tmp_path) -> None:
    table = make_table([cpu_op("nccl:all_reduce", 0, 5)], tmp_path)
    messages: list[str] = []
    assert np.isnan(comm_bytes(table, np.array([0]), messages)).all() and messages == []
