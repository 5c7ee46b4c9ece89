"""Op categories (issue 25 item 5): the rule table on names at its boundaries, the rollup on a
hand-built trace, and the shared serving traces against TraceLens's own rollup."""

import csv

import pandas as pd
import pytest

from tb_plugin.analysis.kernels import (
    GROUP_BY_KERNEL,
    GROUP_BY_KERNEL_OP,
    build_kernels,
    kernel_table,
)
from tb_plugin.analysis.op_categories import (
    CATEGORIES,
    categorize,
    category_rollup,
    device_categories,
    dominant,
    operator_categories,
)
from tb_plugin.api import open_logdir
from tests.support import SHARED_TRACES, needs_shared

from .helpers import cpu_op, kernel, make_table, memcpy, runtime, step


@pytest.mark.parametrize("name, category", [
    ("aten::mm", "GEMM"), ("aten::addmm", "GEMM"), ("aten::_scaled_mm", "GEMM"),
    ("vllm::rocm_unquantized_gemm", "GEMM"), ("aten::convolution", "GEMM"),
    ("aten::mmx", "other"),  # anchored: not a GEMM by prefix
    ("aten::scaled_dot_product_attention", "attention"), ("sglang::store_cache", "attention"),
    ("aiter::rmsnorm", "normalization"), ("aten::layer_norm", "normalization"),
    ("aten::argmax", "reduction"), ("aten::sum", "reduction"), ("aten::summary", "other"),
    ("aten::add", "elementwise"), ("aten::add_", "elementwise"), ("aten::copy_", "elementwise"),
    ("sgl_kernel::silu_and_mul", "elementwise"), ("_C::rotary_embedding", "elementwise"),
    ("nccl:all_reduce", "communication"), ("c10d::allreduce_", "communication"),
    ("aten::arange", "other"), ("SortTokens", "other"),
])
def test_operator_rules(name, category):
    assert categorize(name, operator=True) == category


@pytest.mark.parametrize("name, category", [
    ("Cijk_Alik_Bljk_BBS_BH_MT256x192x64", "GEMM"), ("ampere_sgemm_128x64_tn", "GEMM"),
    ("xCijk_", "other"),  # the Tensile prefix is anchored
    ("flash_fwd_kernel<...gemm...>", "attention"),  # attention is tested before GEMM
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "communication"),
    ("triton_poi_fused_add_0", "elementwise"), ("triton_red_fused_sum_0", "reduction"),
    ("triton_per_fused_softmax_1", "reduction"), ("triton_tem_fused_mm_2", "GEMM"),
    ("void at::native::vectorized_elementwise_kernel<4>", "elementwise"),
    ("MIOpenBatchNormFwdTrainSpatialMeanVariance", "normalization"),
    ("some_custom_kernel", "other"),
    # triton_kernels' MoE matmul_ogs: the expert GEMM, and its top-k combine (a reduction)
    ("_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1_swiglu", "GEMM"),
    ("_finalize_matmul_scatter_bf16", "reduction"), ("_finalize_matmul", "reduction"),
])
def test_kernel_rules(name, category):
    assert categorize(name, operator=False) == category


def test_rollup(tmp_path):
    """aten::mm launches a GEMM kernel (30 us); MyOp (other) launches a softmax kernel (10 us):
    the kernel name decides (reduction); a kernel outside any op named
    vectorized_elementwise (5 us): elementwise; a memcpy launched by aten::mm (4 us):
    memcpy/memset whatever its operator. Total 49 us."""
    table = make_table([
        step(1, 0, 200),
        cpu_op("aten::mm", 10, 40, ext=1), runtime(12, 2, corr=1, ext=1),
        kernel(20, 30, corr=1, name="ampere_sgemm"),
        runtime(15, 2, corr=4, ext=1, name="cudaMemcpyAsync"), memcpy(60, 4, corr=4),
        cpu_op("MyOp", 60, 30, ext=2), runtime(62, 2, corr=2, ext=2),
        kernel(70, 10, corr=2, name="softmax_warp_forward"),
        runtime(100, 2, corr=3), kernel(110, 5, corr=3, name="vectorized_elementwise_kernel"),
    ], tmp_path)
    roll = {r["category"]: (r["events"], r["time_us"]) for r in category_rollup(table)}
    assert list(roll) == list(CATEGORIES)
    assert roll["GEMM"] == (1, 30.0) and roll["reduction"] == (1, 10.0)
    assert roll["elementwise"] == (1, 5.0) and roll["memcpy/memset"] == (1, 4.0)
    assert roll["other"] == (0, 0.0)
    frame = device_categories(table).set_index("kernel")
    assert frame.loc["softmax_warp_forward", "operator"] == "MyOp"
    assert frame.loc["vectorized_elementwise_kernel", "operator"] == ""
    # the Operator view: by name, else the category of most of its own device time
    assert operator_categories(table, ["MyOp", "aten::mm", "NoSuchOp"]).tolist() == [
        "reduction", "GEMM", "other"]
    # an operator given from outside (a merged capture) replaces the tree's
    row = int(frame.loc["vectorized_elementwise_kernel", "event"])
    given = device_categories(table, pd.Series(["aten::bmm"], index=[row])).set_index("kernel")
    assert given.loc["vectorized_elementwise_kernel", "category"] == "GEMM"


PEER = {"GEMM": "GEMM", "InferenceAttention": "attention", "RMSNorm": "normalization",
        "elementwise": "elementwise", "RoPE_fwd": "elementwise",
        "multi_tensor_apply": "elementwise", "reduce": "reduction"}


@needs_shared
@pytest.mark.parametrize("run", ["tl_sglang_decode", "tl_sglang_prefilldecode"])
def test_sglang_categories_match_tracelens(run):
    """GEMM, attention, normalization, elementwise and reduction within 2% of TraceLens's
    ops_summary_by_category (its RoPE_fwd and multi_tensor_apply are elementwise here); the
    decode replay uses the captured operators, as TraceLens does. ("other" differs: gather,
    arange, index are elementwise here, other there; see README.)"""
    logdir = open_logdir(str(SHARED_TRACES), use_cache=False)
    operators = None
    if run == "tl_sglang_decode":
        merged = logdir.graph_kernels(run)
        operators = pd.Series(merged["captured_by"].to_numpy(), index=merged["event"])
    ours = {r["category"]: r["time_us"]
            for r in category_rollup(logdir.trace(run).table, operators)}
    peer = dict.fromkeys(PEER.values(), 0.0)
    path = SHARED_TRACES / run / "tracelens_outputs" / "ops_summary_by_category.csv"
    with open(path) as f:
        for r in csv.DictReader(f):
            if r["op category"] in PEER:
                peer[PEER[r["op category"]]] += float(r["total_direct_kernel_time_ms"]) * 1e3
    for category, value in peer.items():
        assert ours[category] == pytest.approx(value, rel=0.02), category


def test_kernel_view_category_column(tmp_path):
    """Grouped by kernel name: "k" runs 30 us under aten::mm (GEMM) and 10 us under MyOp
    (other, the kernel name "k" matches nothing: other): GEMM holds most of its time. Grouped
    with the operator: one row per (kernel, operator), each with its own category. The
    payload's rollup holds every category."""
    table = make_table([
        step(1, 0, 200),
        cpu_op("aten::mm", 10, 40, ext=1), runtime(12, 2, corr=1, ext=1),
        kernel(20, 30, corr=1, name="k"),
        cpu_op("MyOp", 60, 30, ext=2), runtime(62, 2, corr=2, ext=2),
        kernel(70, 10, corr=2, name="k"),
    ], tmp_path)
    by_name = kernel_table(table, GROUP_BY_KERNEL)
    assert by_name[["name", "category"]].values.tolist() == [["k", "GEMM"]]
    by_op = kernel_table(table, GROUP_BY_KERNEL_OP)
    assert sorted(by_op[["operator", "category"]].values.tolist()) == [
        ["MyOp", "other"], ["aten::mm", "GEMM"]]
    rollup = build_kernels(table)["categories"]
    assert [c["category"] for c in rollup] == list(CATEGORIES)
    assert {c["category"]: c["time_us"] for c in rollup if c["time_us"]} == {
        "GEMM": 30.0, "other": 10.0}
    assert sum(c["pct"] for c in rollup) == pytest.approx(100.0)


def test_dominant_category_by_summed_time_ties_to_the_earlier_category():
    # CATEGORIES order: GEMM, attention, normalization, elementwise, reduction, communication,
    # memcpy/memset, other
    rows = [("a", "elementwise", 3), ("a", "GEMM", 5), ("a", "elementwise", 3),  # 6 > 5
            ("b", "other", 2), ("b", "attention", 2),  # tie: attention is earlier
            ("c", "memcpy/memset", 1),  # one category
            ("d", "attention", 4), ("d", "GEMM", 4),  # tie: GEMM is earlier
            ("e", "reduction", 1), ("e", "GEMM", 1.5), ("e", "reduction", 1),  # 2 > 1.5
            ("f", "GEMM", 1), ("f", "other", 1.001)]  # just more: other
    frame = pd.DataFrame(rows, columns=["key", "category", "dur_us"])
    assert list(CATEGORIES[:2]) == ["GEMM", "attention"]
    assert dominant(frame, "key") == {"a": "elementwise", "b": "attention",
                                      "c": "memcpy/memset", "d": "GEMM", "e": "reduction",
                                      "f": "other"}
    # the order of the rows does not matter
    assert dominant(frame.iloc[::-1], "key") == dominant(frame, "key")
