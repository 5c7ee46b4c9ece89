"""`analysis.inference.bandwidth`'s byte estimates on recorded argument strings: the weight of a
GEMM is its last 2-D input (numel x element size), a KV-cache write's K + V bytes per token are
its first two inputs' numel / rows x element size; anything unreadable is unknown (None); the
graph-replay note. Sizes: bf16 2 bytes, float 4 (written out here)."""

from __future__ import annotations

import pytest

from tb_plugin.analysis.inference.bandwidth import graph_note, kv_bytes_per_token, weight_bytes

BF16, F32 = "c10::BFloat16", "float"


@pytest.mark.parametrize(("dims", "types", "expected"), [
    ("[[4, 64], [64, 128]]", [BF16, BF16], 64 * 128 * 2.0),
    ("[[4, 64], [64, 128]]", [BF16, F32], 64 * 128 * 4.0),  # the weight's own type
    ("[[128], [4, 64], [64, 128], [], []]", [BF16, BF16, BF16, "Scalar", "Scalar"],
     64 * 128 * 2.0),  # addmm: bias, input, weight, beta, alpha
    ("[[4, 64], [64, 128], [3, 5, 7]]", [BF16, BF16, BF16], 64 * 128 * 2.0),  # last *2-D*
    ("[[1, 1]]", [F32], 4.0),
    ("[[4, 64], [64, 128]]", [BF16], None),  # the last 2-D input has no type: unknown
    ("[[3, 5, 7]]", [BF16], None), ("[[64, 128]]", ["no such type"], None),
    ("[[64, 128.5]]", [BF16], None), ("[[]]", [BF16], None), ("[]", [], None),
    ("not json", [BF16], None), ("{\"a\": 1}", [BF16], None), (None, None, None),
    ("", [BF16], None),
])
def test_weight_bytes(dims, types, expected):
    assert weight_bytes(dims, None if types is None else str(types)) == expected


@pytest.mark.parametrize(("dims", "types", "expected"), [
    # K [4, 8] and V [4, 8] bf16 for 4 tokens: 8 x 2 + 8 x 2 bytes per token
    ("[[4, 8], [4, 8], [100, 8], [100, 8], [4]]", [BF16] * 4 + ["long int"], 32.0),
    ("[[4, 8, 16], [4, 8, 16]]", [BF16, F32], 8 * 16 * 2.0 + 8 * 16 * 4.0),
    ("[[1, 8], [1, 4]]", [F32, F32], 48.0),
    ("[[4, 8]]", [BF16], None),  # one input
    ("[[4, 8], [4, 8]]", [BF16], None),  # one type
    ("[[0, 8], [0, 8]]", [BF16, BF16], None),  # no rows
    ("[[4, 8], []]", [BF16, BF16], None),
    ("[[4, 8], [4, 8]]", [BF16, "no such type"], None),
    ("nope", [BF16, BF16], None),
])
def test_kv_bytes_per_token(dims, types, expected):
    assert kv_bytes_per_token(dims, str(types)) == expected


def test_graph_note():
    assert graph_note(None, True) is None and graph_note(None, True, True) is None
    assert graph_note("no sk", False) == "no sk" and graph_note("no sk", False, True) == "no sk"
    assert graph_note("no sk", True) == ("no sk (a CUDA/HIP graph replay: its operators and "
                                         "shapes are in the capture trace)")
    assert graph_note("no sk", True, True) == (
        "no sk (a CUDA/HIP graph replay, its capture trace read too)")
