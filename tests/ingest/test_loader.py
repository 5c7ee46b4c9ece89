"""Parsing real traces and real crafted broken files: never raise, keep what can be kept."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from tb_plugin.ingest import Kind, LoadState
from tb_plugin.load import load_trace
from tb_plugin.storage import FileRef, filesystem
from tests.support import SHARED_TRACES, needs_shared, shared_trace_files

GOOD_EVENTS = [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 10, "tid": 11, "ts": 100.5,
     "dur": 20, "args": {"External id": 7, "Input Dims": [[2, 8], [8, 5]],
                         "Input type": ["float", "float"], "Call stack": "a.py(1): f;b.py(2): g"}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 11,
     "ts": 105, "dur": 5, "args": {"External id": 7, "correlation": 99}},
    {"ph": "X", "cat": "kernel", "name": "sgemm_kernel", "pid": 0, "tid": "stream 7",
     "ts": 130, "dur": 12.25, "args": {"External id": 7, "correlation": 99, "device": 0,
                                       "stream": 7, "grid": [4, 1, 1], "block": [128, 1, 1],
                                       "blocks per SM": 0.5, "est. achieved occupancy %": 25}},
    {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 10, "tid": 11, "ts": 101,
     "s": "t", "args": {"Device Type": 1, "Device Id": 0, "Addr": 123456, "Bytes": 512,
                        "Total Allocated": 1024, "Total Reserved": 2048}},
    {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 99, "pid": 10, "tid": 11, "ts": 105},
    {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 99, "pid": 0, "tid": 7, "ts": 130,
     "bp": "e"},
    {"ph": "M", "name": "process_name", "pid": 10, "tid": 0, "args": {"name": "python3"}},
]
DOCUMENT = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "A100", "numSms": 108}],
            "traceEvents": GOOD_EVENTS, "distributedInfo": {"rank": 0, "backend": "nccl"},
            "baseTimeNanoseconds": 1700000000000000000}


def _write(path: Path, data: bytes, gz: bool = False) -> Path:
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


@pytest.mark.parametrize("gz", [False, True])
def test_columns_metadata_and_side_tables(tmp_path: Path, gz: bool) -> None:
    table = load_trace(str(_write(tmp_path / "w.pt.trace.json", json.dumps(DOCUMENT).encode(),
                                  gz)), use_cache=False)
    assert table.status.state == LoadState.OK
    events = table.events
    assert events["name"].tolist() == ["aten::mm", "cudaLaunchKernel", "sgemm_kernel"]
    assert events["kind"].tolist() == [Kind.CPU_OP, Kind.RUNTIME, Kind.KERNEL]
    assert events["tid"].tolist() == ["11", "11", "stream 7"]
    assert events["ts"].tolist() == [100.5, 105.0, 130.0]
    assert events["external_id"].tolist() == [7, 7, 7]
    assert events["correlation"].fillna(-1).tolist() == [-1, 99, 99]
    op = table.op_args.iloc[0]
    assert op["input_dims"] == "[[2, 8], [8, 5]]"
    assert op["call_stack"] == "a.py(1): f;b.py(2): g"
    kernel = table.device_args.iloc[0]
    assert (kernel["event"], kernel["grid"], kernel["block"]) == (2, "[4, 1, 1]", "[128, 1, 1]")
    assert (kernel["blocks_per_sm"], kernel["occupancy"]) == (0.5, 25)
    assert table.memory[["addr", "bytes", "total_allocated"]].iloc[0].tolist() == [123456, 512,
                                                                                   1024]
    assert table.flows["id"].tolist() == [99, 99]
    assert table.flows["binding"].astype(object).fillna("").tolist() == ["", "e"]
    meta = table.metadata
    assert meta.device_properties[0]["name"] == "A100"
    assert meta.distributed_info == {"rank": 0, "backend": "nccl"}
    assert meta.base_time_ns == 1700000000000000000
    assert meta.process_metadata == [{"name": "process_name", "pid": "10", "tid": "0",
                                      "value": "python3"}]


def test_trace_events_after_other_keys_and_legacy_array(tmp_path: Path) -> None:
    legacy = [{"ph": "X", "cat": "Operator", "name": "conv", "pid": "CPU Functions", "tid": 1,
               "ts": 5, "dur": 3}]
    table = load_trace(str(_write(tmp_path / "legacy.json", json.dumps(legacy).encode())),
                       use_cache=False)
    assert table.status.state == LoadState.OK
    assert table.events["pid"].tolist() == ["CPU Functions"]
    assert table.events["kind"].tolist() == [Kind.CPU_OP]


@pytest.mark.parametrize("cut_fraction", [0.3, 0.6, 0.95])
def test_truncated_gzip_keeps_events_before_the_cut(tmp_path: Path, cut_fraction: float) -> None:
    events = [{"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": i,
               "dur": 1} for i in range(20000)]
    data = gzip.compress(json.dumps({"traceEvents": events}).encode())
    path = tmp_path / "w.pt.trace.json.gz"
    path.write_bytes(data[: int(len(data) * cut_fraction)])
    table = load_trace(str(path), use_cache=False)
    assert table.status.state == LoadState.TRUNCATED
    assert any("cut off" in m for m in table.status.messages)
    kept = table.events["name"].tolist()
    assert 0 < len(kept) < 20000
    assert kept == [f"op{i}" for i in range(len(kept))]  # a prefix, nothing invented


def test_truncated_plain_json(tmp_path: Path) -> None:
    text = json.dumps(DOCUMENT).encode()
    table = load_trace(str(_write(tmp_path / "w.json", text[: text.index(b"[memory]")])),
                       use_cache=False)
    assert table.status.state == LoadState.TRUNCATED
    assert len(table.events) == 3
    assert table.metadata.device_properties[0]["name"] == "A100"  # header before the events


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "empty"),
        (b"   \n", "empty"),
        (b"this is not json", "not a readable trace"),
        (b'{"foo": 1, "bar": [1, 2]}', "no 'traceEvents'"),
        (gzip.compress(b"")[:-3] + b"xx", ""),
    ],
)
def test_unusable_files_are_errors_with_messages(tmp_path: Path, content: bytes,
                                                 message: str) -> None:
    table = load_trace(str(_write(tmp_path / "bad.pt.trace.json", content)), use_cache=False)
    assert table.status.state in (LoadState.ERROR, LoadState.TRUNCATED)
    assert table.status.messages and message in " ".join(table.status.messages)
    assert len(table.events) == 0


def test_malformed_events_are_skipped_not_fatal(tmp_path: Path) -> None:
    body = (b'{"traceEvents": [{"ph": "X", "name": "good1", "ts": 1, "dur": 1, "tid": 1},'
            b'{"ph": "X", "name": "bad json", "ts": 2, "dur": },'
            b'{"ph": "X", "name": "na", "ts": 3, "dur": N/A, "tid": 1},'
            b'{"ph": "X", "name": "bad args", "ts": 4, "dur": 1, "args": "oops"},'
            b'17,'
            b'{"ph": "X", "name": "good2", "ts": 5, "dur": 1, "tid": 1}]}')
    table = load_trace(str(_write(tmp_path / "w.json", body)), use_cache=False)
    assert table.status.state == LoadState.PARTIAL
    assert table.events["name"].tolist() == ["good1", "na", "bad args", "good2"]
    assert np.isnan(table.events["dur"].iloc[1])  # N/A read as "unknown", not a crash
    assert table.status.skipped_events == 2


def test_missing_fields_odd_types_and_negative_durations(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "name": "no cat, no tid", "ts": 1, "dur": 2},
        {"ph": "X", "cat": "cpu_op", "ts": 2, "dur": 1, "tid": 3},  # no name
        {"ph": "X", "cat": "kernel", "name": "k", "ts": "3.5", "dur": "2", "pid": 0, "tid": 7,
         "args": {"device": "zero", "grid": "grid(100,)", "correlation": [1]}},
        {"ph": "X", "cat": "cpu_op", "name": "neg", "ts": 4, "dur": -5, "tid": 1},
        {"ph": "X", "cat": "cpu_op", "name": "no ts", "dur": 5, "tid": 1},
        {"ph": "X", "cat": "MyCustomCategory", "name": "custom", "ts": 6, "dur": 1, "tid": 1},
    ]
    table = load_trace(str(_write(tmp_path / "w.json", json.dumps({"traceEvents": events})
                                  .encode())), use_cache=False)
    ev = table.events
    assert ev["name"].tolist() == ["no cat, no tid", "", "k", "neg", "custom"]
    assert ev["kind"].tolist() == [Kind.OTHER, Kind.CPU_OP, Kind.KERNEL, Kind.CPU_OP, Kind.OTHER]
    assert ev["cat"].tolist()[-1] == "MyCustomCategory"  # unknown categories are kept
    assert ev["ts"].iloc[2] == 3.5 and ev["dur"].iloc[2] == 2
    assert ev["dur"].iloc[3] == 0  # negative duration clamped
    assert np.isnan(table.device_args["device"].iloc[0])
    assert table.device_args["grid"].iloc[0] == "grid(100,)"
    assert table.status.state == LoadState.PARTIAL
    text = " ".join(table.status.messages)
    assert "negative duration" in text and "no numeric 'ts'" in text


def test_float_nanosecond_timestamps_keep_sub_us_resolution(tmp_path: Path) -> None:
    events = [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 2413669096100.149, "dur": 0.125,
               "tid": 1}]
    table = load_trace(str(_write(tmp_path / "w.json", json.dumps({"traceEvents": events})
                                  .encode())), use_cache=False)
    assert table.events["ts"].iloc[0] == pytest.approx(2413669096100.149, abs=1e-3)
    assert table.events["dur"].iloc[0] == 0.125


def test_unreadable_file_is_an_error(tmp_path: Path) -> None:
    fs, path = filesystem(str(tmp_path / "gone.json"))
    table = load_trace(FileRef(fs, path, 0, ""), use_cache=False)
    assert table.status.state == LoadState.ERROR
    assert "cannot read" in table.status.messages[0]


@needs_shared
@pytest.mark.parametrize("path", shared_trace_files(), ids=lambda p: p.parent.name)
def test_every_shared_trace_parses_cleanly(path: Path) -> None:
    table = load_trace(str(path), use_cache=False)
    assert table.status.state == LoadState.OK, table.status.messages
    reference = json.loads(gzip.decompress(path.read_bytes()))
    raw = reference["traceEvents"]
    assert table.event_count == sum(1 for e in raw if e.get("ph") != "M")
    assert len(table.metadata.process_metadata) == sum(1 for e in raw if e.get("ph") == "M")
    durations = [e for e in raw if e.get("ph") == "X"]
    assert int((table.events["ph"] == "X").sum()) == len(durations)
    assert table.events["dur"].sum() == pytest.approx(sum(e["dur"] for e in durations))
    kernels = sum(1 for e in raw if e.get("ph") == "X" and e.get("cat", "").lower() == "kernel")
    assert int((table.events["kind"] == Kind.KERNEL).sum()) == kernels


@needs_shared
def test_variant_specifics() -> None:
    triton = load_trace(str(next((SHARED_TRACES / "triton_kernels").glob("*.gz"))),
                        use_cache=False)
    assert (triton.events["kind"] == Kind.DRIVER).sum() == 1  # cuLaunchKernel
    legacy = load_trace(str(sorted((SHARED_TRACES / "resnet50_gpu_pt19").glob("*.gz"))[0]),
                        use_cache=False)
    kinds = set(legacy.events["kind"].unique())
    assert {Kind.CPU_OP, Kind.RUNTIME, Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET} <= kinds
    assert len(legacy.memory) == 12838
    cpu = load_trace(str(next((SHARED_TRACES / "cpu_only").glob("*.gz"))), use_cache=False)
    assert "Spans" in set(cpu.events["pid"])  # string pids survive
