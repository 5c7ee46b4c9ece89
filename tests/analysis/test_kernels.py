"""Kernel view (spec 1.3, 3.8)."""

from __future__ import annotations

import glob

import numpy as np
import pytest

from tb_plugin.analysis.kernels import (
    build_kernel_pies,
    build_kernels,
    kernel_frame,
)
from tb_plugin.analysis.launch import dims_product, estimate_launch
from tests.support import SHARED_TRACES, needs_shared

from .helpers import make_table
from .legacy_events import kernel, op, runtime

SHARED = str(SHARED_TRACES)
V100 = {"id": 0, "name": "Tesla V100", "computeMajor": 7, "computeMinor": 0,
        "maxThreadsPerMultiprocessor": 2048, "regsPerMultiprocessor": 65536, "warpSize": 32,
        "sharedMemPerMultiprocessor": 98304, "numSms": 80}


def launch(name, ts, dur, corr, ext, **args):
    return [runtime(ts - 10, 5, corr, ext), kernel(ts, dur, corr, ext, name=name, **args)]


def test_group_by_kernel_columns(tmp_path):
    """test_group_by_kernel_columns: split by block size and by op; totals 25/13/17."""
    cfg = {"grid": [16, 1, 1], "registers per thread": 18, "shared memory": 0}
    events = [op("op1", 200, 60, 3, tid="123"), op("op2", 340, 70, 4),
              *launch("kernel1", 230, 15, 1000, 3, block=[16, 16, 16], **cfg),
              *launch("kernel1", 250, 10, 1001, 3, block=[16, 16, 16], **cfg),
              *launch("kernel1", 250, 13, 1002, 3, block=[16, 16, 64], **cfg),
              *launch("kernel1", 360, 17, 1003, 4, block=[16, 16, 64], **cfg)]
    rows = build_kernels(make_table(events, tmp_path), "kernel_op_launch")["rows"]
    got = [(r["operator"], r["block"], r["calls"], r["total_us"], r["mean_us"], r["min_us"],
            r["max_us"]) for r in rows]
    assert got == [("op1", "[16, 16, 16]", 2, 25, 12.5, 10, 15),
                   ("op2", "[16, 16, 64]", 1, 17, 17, 17, 17),
                   ("op1", "[16, 16, 64]", 1, 13, 13, 13, 13)]
    assert all(r["grid"] == "[16, 1, 1]" and r["registers_per_thread"] == 18
               and r["shared_memory"] == 0 and r["name"] == "kernel1" for r in rows)


def test_group_by_kernel_columns_invalid_input(tmp_path):
    """A missing grid/block/registers/shared memory each forms its own group; raw values None."""
    full = {"grid": [16, 1, 1], "block": [16, 16, 16], "registers per thread": 18,
            "shared memory": 0}

    def without(key):
        return {k: v for k, v in full.items() if k != key}

    events = [op("op1", 200, 60, 3, tid="123"),
              *launch("kernel1", 220, 1, 1000, 3, **without("grid")),
              *launch("kernel1", 230, 2, 1001, 3, **without("block")),
              *launch("kernel1", 240, 3, 1002, 3, **without("registers per thread")),
              *launch("kernel1", 250, 4, 1003, 3, **without("shared memory")),
              *launch("kernel1", 260, 5, 1004, 3)]
    rows = build_kernels(make_table(events, tmp_path), "kernel_op_launch")["rows"]
    got = [(r["total_us"], r["grid"], r["block"], r["registers_per_thread"], r["shared_memory"])
           for r in rows]
    assert got == [(5, None, None, None, None), (4, "[16, 1, 1]", "[16, 16, 16]", 18, None),
                   (3, "[16, 1, 1]", "[16, 16, 16]", None, 0), (2, "[16, 1, 1]", None, 18, 0),
                   (1, None, "[16, 16, 16]", 18, 0)]
    assert all(r["operator"] == "op1" and r["calls"] == 1 for r in rows)


def test_kernel_stat_by_name(tmp_path):
    """test_all_categories' kernel part: one kernel group with its op; count/sum/mean/min/max."""
    name = "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>"
    events = [op("aten::nll_loss_backward", 340, 70, 4), runtime(405, 5, 40348, 4),
              kernel(430, 15, 40348, 4, name=name)]
    table = make_table(events, tmp_path)
    (row,) = build_kernels(table)["rows"]
    assert (row["name"], row["calls"], row["total_us"], row["mean_us"], row["min_us"],
            row["max_us"]) == (name, 1, 15, 15, 15, 15)
    (by_op,) = build_kernels(table, "kernel_op_launch")["rows"]
    assert (by_op["operator"], by_op["calls"], by_op["total_us"]) == (
        "aten::nll_loss_backward", 1, 15)


def test_weighted_blocks_per_sm_and_occupancy(tmp_path):
    """test_gpu_utilization's kernel part: duration-weighted means per (kernel, op) and per
    kernel; a zero-length kernel weighs nothing."""
    nll, gemm = "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>", "void gemmSN_TN"

    def k(name, ts, dur, corr, ext, bpsm, occ):
        return {**kernel(ts, dur, corr, ext, name=name, **{
            "blocks per SM": bpsm, "est. achieved occupancy %": occ}), "pid": 1}

    events = [op("aten::mat_mul", 100, 100, 2), op("aten::mm", 120, 70, 4),
              k(nll, 130, 10, 334, 4, 0.5, 0.6), runtime(120, 0, 334, 4),
              k(gemm, 135, 15, 335, 2, 0.6, 0.1), k(gemm, 150, 0, 335, 2, 0.3, 0.2),
              runtime(120, 0, 335, 2),
              k(nll, 145, 25, 336, 4, 0.3, 1.0), runtime(125, 3, 336, 4),
              k(nll, 200, 20, 337, 2, 10.5, 0.3), runtime(195, 1, 337, 2)]
    table = make_table(events, tmp_path)
    by_op = {(r["name"], r["operator"]): r for r in build_kernels(
        table, "kernel_op_launch")["rows"]}
    assert by_op[(gemm, "aten::mat_mul")]["blocks_per_sm"] == 0.6
    assert by_op[(gemm, "aten::mat_mul")]["occupancy_pct"] == 0.1
    mm = by_op[(nll, "aten::mm")]
    assert mm["blocks_per_sm"] == round((0.5 * 10 + 0.3 * 25) / 35, 2)
    assert mm["occupancy_pct"] == round((0.6 * 10 + 1.0 * 25) / 35, 2)
    assert by_op[(nll, "aten::mat_mul")]["blocks_per_sm"] == 10.5
    by_name = {r["name"]: r for r in build_kernels(table)["rows"]}
    assert by_name[gemm]["blocks_per_sm"] == 0.6
    assert by_name[nll]["blocks_per_sm"] == round((0.5 * 10 + 0.3 * 25 + 10.5 * 20) / 55, 2)
    assert by_name[nll]["occupancy_pct"] == round((0.6 * 10 + 1.0 * 25 + 0.3 * 20) / 55, 2)


def test_missing_values_count_as_zero_with_their_weight(tmp_path):
    events = [kernel(0, 10, 1, 0, name="k", **{"blocks per SM": 2.0}), kernel(20, 30, 2, 0,
                                                                                name="k")]
    (row,) = build_kernels(make_table(events, tmp_path))["rows"]
    assert row["blocks_per_sm"] == 0.5
    result = build_kernels(make_table([kernel(0, 5, 1, 0, name="k")], tmp_path))
    assert not result["has_blocks_per_sm"] and result["rows"][0]["blocks_per_sm"] is None


def test_blocks_per_sm_and_occupancy_derived_from_device_properties(tmp_path):
    events = [kernel(0, 10, 1, 0, name="k", grid=[160, 1, 1], block=[256, 1, 1],
                     **{"registers per thread": 32, "shared memory": 0})]
    table = make_table(events, tmp_path, deviceProperties=[V100])
    frame = kernel_frame(table)
    assert frame["blocks_per_sm"].iloc[0] == 2.0
    assert frame["occupancy"].iloc[0] == pytest.approx(2 * 256 / 2048 * 100)
    result = build_kernels(table)
    assert result["has_occupancy"] and result["rows"][0]["occupancy_pct"] == 25.0


def test_estimate_launch_limits():
    blocks, threads = np.array([1000.0, 1000.0, 8.0, np.nan]), np.array([1024.0, 256, 64, 64])
    regs, shmem = np.array([64.0, 32, 0, 0]), np.array([0.0, 65536, 0, 0])
    bpsm, occ = estimate_launch(V100, blocks, threads, regs, shmem)
    np.testing.assert_allclose(bpsm[:3], [12.5, 12.5, 0.1])
    # 64 regs x 1024 threads fills the register file with 1 block; 64 KiB smem allows 1 block
    np.testing.assert_allclose(occ[:3], [50.0, 12.5, 0.1 * 64 / 2048 * 100])
    assert np.isnan(bpsm[3]) and np.isnan(occ[3])
    assert np.isnan(estimate_launch({}, blocks, threads, regs, shmem)[0]).all()


def test_dims_product():
    import pandas as pd

    got = dims_product(pd.Series(["[4, 106, 1]", None, "[0, 1, 1]", "[4, 106, 1]"]))
    np.testing.assert_array_equal(got, [424, np.nan, np.nan, 424])


def test_ties_sorted_by_name(tmp_path):
    events = [kernel(0, 5, 1, 0, name="b"), kernel(10, 5, 2, 0, name="a"),
              kernel(20, 9, 3, 0, name="c")]
    table = make_table(events, tmp_path)
    assert [r["name"] for r in build_kernels(table)["rows"]] == ["c", "a", "b"]
    pies = build_kernel_pies(table, top_n=2)
    assert pies["total"] == [{"name": "c", "value": 9}, {"name": "a", "value": 5}]
    assert pies["tensor_cores"] == {"using": 0.0, "not_using": 1.0}


def test_tensor_core_pie(tmp_path):
    events = [kernel(0, 30, 1, 0, name="volta_h884gemm_64x64_nn"),
              kernel(40, 10, 2, 0, name="elementwise")]
    pies = build_kernel_pies(make_table(events, tmp_path))
    assert pies["tensor_cores"] == {"using": 0.75, "not_using": 0.25}
    assert build_kernel_pies(make_table([op("aten::mm", 0, 1, 1)], tmp_path)) == {
        "total": [], "tensor_cores": None, "matrix_units": "tensor cores"}


def test_invalid_group_by(tmp_path):
    with pytest.raises(ValueError):
        build_kernels(make_table([], tmp_path), "KernelNameAndOpName")


@needs_shared
def test_resnet50_golden_kernel_table():
    """Golden: 67 kernel rows by name on resnet50_gpu_pt19 span 1, with the reference's values."""
    from tb_plugin.load import load_trace

    table = load_trace(f"{SHARED}/resnet50_gpu_pt19/worker0.1623143089861.pt.trace.json.gz",
                       use_cache=False)
    result = build_kernels(table)
    rows = result["rows"]
    assert len(rows) == 67 and len(build_kernel_pies(table, top_n=None)["total"]) == 67
    golden = {  # name prefix: calls, total, mean, max, min, blocks/SM, occupancy
        "void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>":
            (162, 80756, 498, 1017, 323, 42.25, 29.97),
        "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 512, true, 1>":
            (264, 59642, 226, 915, 45, 4.34, 67.98),
        "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>":
            (3090, 39814, 13, 378, 1, 641.54, 92.32),
        "volta_sgemm_64x64_nt": (102, 21084, 207, 279, 184, 10.24, 19.38),
    }
    for prefix, want in golden.items():
        (row,) = [r for r in rows if r["name"].startswith(prefix)]
        got = (row["calls"], round(row["total_us"]), round(row["mean_us"]), round(row["max_us"]),
               round(row["min_us"]), row["blocks_per_sm"], row["occupancy_pct"])
        assert got == want, prefix
    totals = [(-r["total_us"], r["name"]) for r in rows]
    assert totals == sorted(totals)
    assert not any(r["tensor_cores"] for r in rows)
    assert len(build_kernels(table, "kernel_op_launch")["rows"]) > 67


@needs_shared
def test_amd_kernels_without_launch_args():
    from tb_plugin.load import load_trace

    (path,) = glob.glob(f"{SHARED}/amd_mi250_rocm/*.json.gz")
    result = build_kernels(load_trace(path, use_cache=False), "kernel_op_launch")
    assert result["rows"] and not result["has_blocks_per_sm"]
    assert all(r["grid"] is None and r["blocks_per_sm"] is None for r in result["rows"])


def test_kernel_numbers_round_as_documented(tmp_path):
    """Durations with 3 decimals, blocks/SM and occupancy with 2, pie values with 3."""
    args = {"blocks per SM": 1.23456, "est. achieved occupancy %": 12.34567}
    events = [op("aten::mm", 0, 100, 1), runtime(1, 1, 1, 1),
              kernel(10, 10.12345, 1, 1, name="k", **args), runtime(2, 1, 2, 1),
              kernel(30, 10.0, 2, 1, name="k", **args), runtime(3, 1, 3, 1),
              kernel(50, 11.0, 3, 1, name="k", **args)]
    table = make_table(events, tmp_path)
    (row,) = build_kernels(table)["rows"]
    assert (row["calls"], row["total_us"], row["mean_us"], row["max_us"], row["min_us"]) == (
        3, 31.123, 10.374, 11.0, 10.0)  # 31.12345, 31.12345 / 3 = 10.37448...
    assert (row["blocks_per_sm"], row["occupancy_pct"]) == (1.23, 12.35)
    (slice_,) = build_kernel_pies(table)["total"]
    assert slice_ == {"name": "k", "value": 31.123}
