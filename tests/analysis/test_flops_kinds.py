"""`analysis.efficiency.flops`: which kind an `aten::` name is (in-place `_` suffix, private `_`
prefix), and the bytes-moved estimate of elementwise ops and reductions at its edges (an empty
tensor, the output counted only for norms and softmaxes, the dtype of the first known type)."""

from __future__ import annotations

import math

import pytest

from tb_plugin.analysis.efficiency.flops import estimate, op_kind


@pytest.mark.parametrize(("name", "kind"), [
    ("aten::mm", "mm"), ("aten::linear", "mm"), ("aten::_scaled_mm", "mm"),
    ("aten::conv2d", "conv"), ("aten::convolution_backward", "conv_backward"),
    ("aten::_scaled_dot_product_flash_attention", "attention"),
    ("aten::_flash_attention_backward", "attention_backward"),
    ("aten::add", "elementwise"), ("aten::add_", "elementwise"), ("aten::relu_", "elementwise"),
    ("aten::_to_copy", "elementwise"), ("aten::copy_", "elementwise"),
    ("aten::sum", "reduction"), ("aten::_softmax", "reduction"),
    ("aten::native_layer_norm", "reduction"),
    ("aten::sum_", None),  # the in-place spelling is read for elementwise ops only
    ("aten::_add", None),  # a private name is not its public one
    ("aten::view", None), ("add", None), ("prim::add", None), ("aten::", None),
])
def test_op_kind(name, kind):
    assert op_kind(name) == kind


def test_elementwise_needs_elements():
    flops, bytes_, dtype, reason, _ = estimate("aten::mul", "[[3, 5], [3, 5]]",
                                               "['float', 'float']", None)
    assert (flops, bytes_, dtype, reason) == (15.0, 4 * (15 + 15 + 15.0), "fp32", None)
    flops, bytes_, *_ = estimate("aten::mul", "[[0, 5], [0, 5]]", "['float', 'float']", None)
    assert math.isnan(flops) and math.isnan(bytes_)
    # the largest input sets the FLOPs (a broadcast scalar does not)
    flops, bytes_, *_ = estimate("aten::mul", "[[1], [4, 2]]", "['c10::Half', 'c10::Half']",
                                 None)
    assert (flops, bytes_) == (8.0, 2 * (1 + 8 + 8.0))


def test_reductions_count_the_output_only_for_norms_and_softmax():
    types = "['c10::BFloat16']"
    assert estimate("aten::mean", "[[10, 6]]", types, None)[:3] == (60.0, 120.0, "bf16")
    assert estimate("aten::rms_norm", "[[10, 6]]", types, None)[:2] == (60.0, 240.0)
    assert estimate("aten::log_softmax", "[[10, 6]]", types, None)[:2] == (60.0, 240.0)
    flops, bytes_, *_ = estimate("aten::mean", "[[0, 6]]", types, None)
    assert math.isnan(flops) and math.isnan(bytes_)
    # the first input is the reduced one: an empty first input is nothing to reduce
    flops, *_ = estimate("aten::sum", "[[], [10, 6]]", "['', 'float']", None)
    assert math.isnan(flops)


@pytest.mark.parametrize(("recorded", "dtype"), [
    ("float", "fp32"), ("double", "fp64"), ("c10::Half", "fp16"), ("half", "fp16"),
    ("c10::BFloat16", "bf16"), ("signed char", "int8"), ("unsigned char", "int8"),
    ("long int", None),
])
def test_dtype_of_the_first_known_type(recorded, dtype):
    assert estimate("aten::add", "[[4], [4]]", str([recorded, "float"]), None)[2] == (
        dtype or "fp32")
    assert estimate("aten::add", "[[4]]", str([recorded]), None)[2] == dtype
