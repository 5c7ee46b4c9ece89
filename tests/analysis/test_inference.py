"""The Inference view's analysis (issue 25 item 4) on hand-written annotation names and
generated traces: every expected number is derived in the docstrings from what is written."""

import pytest

from tb_plugin.analysis.features import features
from tb_plugin.analysis.inference.annotations import parse_step_name, phase_of
from tb_plugin.analysis.inference.steps import WARMUP_FACTOR, serving_steps
from tb_plugin.analysis.inference.view import build_inference
from tb_plugin.views.errors import NotInTrace
from tb_plugin.views.registry import build_view

from .helpers import cpu_op, kernel, make_table, runtime

VLLM_DECODE = ("execute_32_context_0(sq0sk0sqsq0sqsk0)"
               "_generation_32(sq32sk55086sqsq32sqsk55086)")
VLLM_PREFILL = ("execute_15360_context_15(sq15360sk15360sqsq15728640sqsk15728640)"
                "_generation_0(sq0sk0sqsq0sqsk0)")
VLLM_MIXED = ("execute_1056_context_1(sq1024sk1024sqsq1048576sqsk1048576)"
              "_generation_32(sq32sk4000sqsq32sqsk4000)")


@pytest.mark.parametrize("name, phase, expected", [
    # execute_<T>: T tokens; context_<C>(sq sk ..): C requests, Σ N_Q, Σ N_KV; same for G
    (VLLM_DECODE, "decode", dict(requests=32, context_requests=0, generation_requests=32,
                                 tokens=32, generation_tokens=32, generation_kv_tokens=55086,
                                 context_kv_tokens=0)),
    (VLLM_PREFILL, "prefill", dict(requests=15, context_requests=15, generation_requests=0,
                                   tokens=15360, context_tokens=15360,
                                   context_kv_tokens=15360)),
    (VLLM_MIXED, "mixed", dict(requests=33, tokens=1056, context_kv_tokens=1024,
                               generation_kv_tokens=4000)),
    # vllm#22496: execute_context_<C>(<tokens>)_generation_<G>(<tokens>): T = 2048 + 30
    ("execute_context_2(2048)_generation_30(30)", "mixed",
     dict(requests=32, tokens=2078, context_tokens=2048, generation_tokens=30,
          generation_kv_tokens=None)),
    ("execute_context_0(0)_generation_8(8)", "decode", dict(requests=8, tokens=8)),
    # SGLang: decode processes one token per request; EXTEND is prefill with toks=
    ("step[DECODE bs=32]", "decode", dict(requests=32, generation_requests=32, tokens=32,
                                          context_requests=0)),
    ("step[EXTEND bs=15 toks=15360]", "prefill", dict(requests=15, context_requests=15,
                                                      generation_requests=0, tokens=15360)),
    ("step[prefill bs=2 toks=100]", "prefill", dict(requests=2, tokens=100)),
    ("step[mixed bs=66 ext=2048 dec=64]", "mixed", dict(requests=66, tokens=2112,
                                                        context_tokens=2048,
                                                        generation_tokens=64)),
    ("step[MIXED bs=66 c=2 g=64 c_sq=2048 c_sk=2048 c_sqsq=2097152 c_sqsk=2097152 g_sq=64 "
     "g_sk=65600 g_sqsq=64 g_sqsk=65600]", "mixed",
     dict(requests=66, context_requests=2, generation_requests=64, tokens=2112,
          context_kv_tokens=2048, generation_kv_tokens=65600)),
    ("step[DECODE bs=64 g_sqsq=64 g_sqsk=100032 g_sk=100032]", "decode",
     dict(requests=64, tokens=64, generation_kv_tokens=100032)),
    ("step[idle]", "idle", dict(requests=None, tokens=None)),
    ("step[TARGET_VERIFY bs=4]", "other", dict(requests=4, tokens=None)),
])
def test_step_names(name, phase, expected):
    parsed = parse_step_name(name)
    assert parsed is not None and parsed["phase"] == phase
    assert {k: parsed[k] for k in expected} == expected


@pytest.mark.parametrize("name", [
    "execute_model", "step", "ProfilerStep#3", "step[DECODE bs=x]", "xstep[DECODE bs=1]",
    "execute_32_context_0(sq0)_generation_32(sq32)", "step[DECODE bs=1] ",
    "execute_context_1(2)_generation_3(4)x", "capture_32_DECODE",
])
def test_other_names_are_not_steps(name):
    assert parse_step_name(name) is None


@pytest.mark.parametrize("ctx, gen, phase", [
    (1, 0, "prefill"), (0, 1, "decode"), (1, 1, "mixed"), (0, 0, "idle"), (None, 1, "other"),
    (1, None, "other"),
])
def test_phase_rule_boundaries(ctx, gen, phase):
    assert phase_of(ctx, gen) == phase


def _decode_steps(times, *, name="step[DECODE bs=4]", extra=()):
    """Step i: annotation [1000 i, 1000 i + 100) on the main thread, one launch at +10 (5 us),
    its kernel at +200 lasting times[i] us: time_us = times[i]."""
    events = []
    for i, t in enumerate(times):
        base = 1000 * i
        events += [cpu_op(name, base, 100, cat="user_annotation"),
                   runtime(base + 10, 5, corr=100 + i), kernel(base + 200, t, corr=100 + i)]
    return events + list(extra)


def _states(tmp_path, times):
    return list(serving_steps(make_table(_decode_steps(times), tmp_path))["state"])


def test_warmup_boundary_at_the_factor(tmp_path):
    """Median of [20, 10, 10, 10, 10] is 10; 20 = 2.0 x 10 is not more than the factor: every
    step is steady. 20.5 > 20: the first step is warm-up."""
    assert WARMUP_FACTOR == 2.0
    assert _states(tmp_path, [20, 10, 10, 10, 10]) == ["steady"] * 5
    assert _states(tmp_path, [20.5, 10, 10, 10, 10]) == ["warm-up"] + ["steady"] * 4


def test_warmup_is_only_the_leading_run(tmp_path):
    """[50, 30, 10, 40, 10]: median 30, factor 60: nothing is over it, all steady. [50, 30, 10,
    10, 10]: median 10, limit 20: 50 and 30 lead and are over it (warm-up); [30, 10, 40, 10,
    10]: 30 is warm-up, 40 (after a steady step) stays steady."""
    assert _states(tmp_path, [50, 30, 10, 40, 10]) == ["steady"] * 5
    assert _states(tmp_path, [50, 30, 10, 10, 10]) == ["warm-up"] * 2 + ["steady"] * 3
    assert _states(tmp_path, [30, 10, 40, 10, 10]) == ["warm-up"] + ["steady"] * 4


def test_warmup_median_is_per_phase(tmp_path):
    """A prefill step of 100 us first, then decode steps: the prefill's median is its own
    (100), so it is steady; the decode phase's leading 25 us step is warm-up (25 > 2 x 10,
    the decode median), though a prefill step came before it."""
    events = [cpu_op("step[EXTEND bs=1 toks=64]", 0, 100, cat="user_annotation"),
              runtime(10, 5, corr=1), kernel(200, 100, corr=1)]
    decode = _decode_steps([25, 10, 10, 10, 10, 10])
    for e in decode:
        e["ts"] += 1000
    steps = serving_steps(make_table(events + decode, tmp_path))
    assert list(steps["phase"]) == ["prefill"] + ["decode"] * 6
    assert list(steps["state"]) == ["steady", "warm-up"] + ["steady"] * 5


def test_capture_and_idle_steps_leave_the_window(tmp_path):
    """Step 0 holds a launch between hipStreamBeginCapture and hipStreamEndCapture (recorded,
    never run): capture. Step 1 is idle. Step 2's capture window ends before a launch at its
    very end (half-open: a launch at `end` is not the step's), so it stays steady."""
    events = [
        cpu_op("step[DECODE bs=2]", 0, 100, cat="user_annotation"),
        runtime(10, 1, corr=1, name="hipStreamBeginCapture"),
        runtime(20, 2, corr=2, name="hipLaunchKernel"),
        runtime(30, 1, corr=3, name="hipStreamEndCapture"),
        cpu_op("step[idle]", 1000, 50, cat="user_annotation"),
        cpu_op("step[DECODE bs=2]", 2000, 100, cat="user_annotation"),
        runtime(2010, 5, corr=4), kernel(2050, 10, corr=4),
        runtime(2099, 1, corr=5, name="hipStreamBeginCapture"),
        runtime(2100, 2, corr=6, name="hipLaunchKernel"),
    ]
    steps = serving_steps(make_table(events, tmp_path))
    assert list(steps["state"]) == ["capture", "idle", "steady"]
    payload = build_inference(make_table(events, tmp_path))
    assert payload["steady"] == {"steps": 1, "first_step": 2, "last_step": 2, "warmup": 0,
                                 "capture": 1, "idle": 1, "warmup_factor": 2.0}


def test_device_work_of_a_step(tmp_path):
    """Annotation [0, 100): a launch at 0 (its start is the step's start: inside) and one at
    99.5; a launch at 100 (the end) and one on another thread belong to no step. Kernels
    [200, 260) and [230, 300) overlap, [400, 410) is apart: gpu_us = 100 + 10 = 110, span =
    410 - 200 = 210; the 5 and 7 us kernels of the others are not counted."""
    events = [
        cpu_op("step[DECODE bs=4]", 0, 100, cat="user_annotation"),
        runtime(0, 1, corr=1), kernel(200, 60, corr=1, stream=7),
        runtime(99.5, 0.5, corr=2), kernel(230, 70, corr=2, stream=8),
        runtime(50, 1, corr=3), kernel(400, 10, corr=3, stream=7),
        runtime(100, 1, corr=4), kernel(500, 5, corr=4),
        runtime(20, 1, corr=5, tid=999), kernel(600, 7, corr=5),
    ]
    s = serving_steps(make_table(events, tmp_path)).iloc[0]
    assert (s["device_events"], s["gpu_us"], s["span_us"]) == (3, 110.0, 210.0)
    assert s["time_us"] == 110.0 and s["host_us"] == 100.0


def test_nested_annotations_are_one_step(tmp_path):
    """SGLang writes execute_... around step[DECODE bs=4]: one step, counts from both (vLLM's
    sk = 900 KV tokens, SGLang's mode)."""
    events = [cpu_op("execute_4_context_0(sq0sk0sqsq0sqsk0)_generation_4(sq4sk900sqsq4sqsk900)",
                     0, 200, cat="user_annotation"),
              cpu_op("step[DECODE bs=4]", 10, 150, cat="user_annotation"),
              runtime(20, 5, corr=1), kernel(300, 40, corr=1)]
    steps = serving_steps(make_table(events, tmp_path))
    assert len(steps) == 1
    s = steps.iloc[0]
    assert (s["source"], s["mode"], s["phase"]) == ("vllm+sglang", "DECODE", "decode")
    assert (s["requests"], s["tokens"], s["generation_kv_tokens"]) == (4, 4, 900)


H100 = [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85e9, "computeMajor": 9,
         "computeMinor": 0, "numSms": 132, "warpSize": 32}]


def _served(tmp_path):
    """A prefill step [0, 100) and two decode steps [1000, 1100), [2000, 2100), each decode
    step calling aten::mm with weight [64, 128] bf16 (16,384 B) and two store_cache ops
    writing K and V rows of [4, 8] bf16 (per token 2 x 8 x 2 = 32 B, two layers: 64 B).
    Decode KV attended: sk = 1000, so bytes = 16,384 + 64 x 1000 = 80,384 per step. Kernels:
    the prefill's GEMM 300 us; each decode step a GEMM of 6 us (in aten::mm) and an RMSNorm
    kernel of 2 us apart: gpu_us = 8, so 80,384 B / 8 us = 0.010048 TB/s; H100 SXM peak
    3.35 TB/s: 0.29994 %."""
    events = [cpu_op("step[EXTEND bs=2 toks=300]", 0, 100, cat="user_annotation"),
              runtime(10, 5, corr=1), kernel(200, 300, corr=1, name="Cijk_gemm")]
    name = "execute_4_context_0(sq0sk0sqsq0sqsk0)_generation_4(sq4sk1000sqsq4sqsk1000)"
    for i, base in enumerate((1000, 2000)):
        c = 10 * (i + 1)
        dims = {"Input Dims": [[4, 64], [64, 128]],
                "Input type": ["c10::BFloat16", "c10::BFloat16"]}
        cache = {"Input Dims": [[4, 8], [4, 8], [100, 8], [100, 8], [4]],
                 "Input type": ["c10::BFloat16"] * 4 + ["long int"]}
        events += [
            cpu_op(name, base, 100, cat="user_annotation"),
            cpu_op("aten::mm", base + 10, 20, ext=c, **dims),
            runtime(base + 12, 2, corr=c, ext=c), kernel(base + 200, 6, corr=c, ext=c),
            cpu_op("sglang::store_cache", base + 40, 5, ext=c + 1, **cache),
            cpu_op("sglang::store_cache", base + 50, 5, ext=c + 2, **cache),
            cpu_op("aiter::rmsnorm", base + 60, 10, ext=c + 3),
            runtime(base + 62, 2, corr=c + 3, ext=c + 3),
            kernel(base + 210, 2, corr=c + 3, ext=c + 3, name="rmsnorm_kernel"),
        ]
    return make_table(events, tmp_path, deviceProperties=H100)


def test_phase_summaries_latency_and_bandwidth(tmp_path):
    """See `_served`: prefill 300 us for 300 tokens = 1 us/token, 1e6 tokens/s; decode 2 steps
    of 8 us for 4 tokens each: 2 us/token, inter-token latency 8 us, 500,000 tokens/s; time
    by category GEMM 12 (75 %), normalization 4 (25 %)."""
    payload = build_inference(_served(tmp_path))
    assert payload["device"] == {"device": 0, "name": "NVIDIA H100 80GB HBM3",
                                 "peaks_model": "H100-SXM", "memory_tbps": 3.35}
    prefill, decode = payload["phases"]
    assert (prefill["phase"], prefill["steps"], prefill["tokens"]) == ("prefill", 1, 300)
    assert prefill["us_per_token"] == 1.0 and prefill["tokens_per_s"] == 1e6
    assert prefill["inter_token_latency_us"] is None
    assert (decode["phase"], decode["steps"], decode["tokens"]) == ("decode", 2, 8)
    assert decode["time_us"] == 16.0 and decode["mean_step_us"] == 8.0
    assert decode["us_per_token"] == 2.0 and decode["tokens_per_s"] == 500_000.0
    assert decode["inter_token_latency_us"] == 8.0 and decode["mean_requests"] == 4.0
    cats = {c["category"]: (c["time_us"], c["pct"]) for c in decode["categories"]}
    assert cats["GEMM"] == (12.0, 75.0) and cats["normalization"] == (4.0, 25.0)
    assert sum(t for t, _ in cats.values()) == 16.0
    assert decode["bandwidth_steps"] == 2 and decode["mean_bytes"] == 80_384.0
    assert decode["bandwidth_tbps"] == pytest.approx(0.010048, rel=1e-12)
    assert decode["bandwidth_pct"] == pytest.approx(100 * 0.010048 / 3.35, rel=1e-12)
    row = payload["steps"][1]
    assert (row["bytes"], row["bytes_reason"]) == (80_384.0, None)
    assert payload["steps"][0]["bytes_reason"] == (  # the prefill calls no aten::mm
        "no GEMM (aten::mm/addmm) input shapes inside the step")


def test_not_estimable_without_kv_count(tmp_path):
    """SGLang's step[DECODE bs=4] says no sk: the KV read cannot be sized."""
    events = [cpu_op("step[DECODE bs=4]", 0, 100, cat="user_annotation"),
              cpu_op("aten::mm", 10, 20, ext=1, **{"Input Dims": [[4, 64], [64, 128]],
                                                   "Input type": ["float", "float"]}),
              cpu_op("sglang::store_cache", 40, 5, ext=2, **{
                  "Input Dims": [[4, 8], [4, 8]], "Input type": ["float", "float"]}),
              runtime(12, 2, corr=1, ext=1), kernel(200, 6, corr=1, ext=1)]
    row = build_inference(make_table(events, tmp_path))["steps"][0]
    assert row["bytes"] is None
    assert row["bytes_reason"] == ("the step annotation does not say how many KV tokens are "
                                   "attended (sk)")


def test_view_answers_404_without_serving_steps(tmp_path):
    table = make_table([cpu_op("aten::mm", 0, 10)], tmp_path)
    with pytest.raises(NotInTrace, match="no serving step annotation"):
        build_view(table, "inference")


def test_only_host_annotations_are_steps(tmp_path):
    """The same name as a cpu_op, or as the GPU-side mirror (gpu_user_annotation), is no step;
    the host user_annotation is one (features count only it: the tab's predicate)."""
    events = [cpu_op("step[DECODE bs=4]", 0, 100, cat="cpu_op"),
              cpu_op("step[DECODE bs=4]", 200, 100, cat="gpu_user_annotation"),
              cpu_op("step[DECODE bs=4]", 400, 100, cat="user_annotation")]
    table = make_table(events, tmp_path)
    assert list(serving_steps(table)["start"]) == [400.0]
    assert features(table)["serving_steps"] == 1


@pytest.mark.parametrize("operator, expected", [
    ("aten::addmm", (3712.0, None)),
    ("vllm::moe_forward", (None, "GEMM kernels launched outside aten::mm/addmm "
                                 "(vllm::moe_forward): their weights cannot be sized")),
])
def test_gemm_kernels_outside_mm_make_the_weights_unknown(tmp_path, operator, expected):
    """One decode step (sk = 100) with an aten::mm of weight [8, 16] fp32 (512 B), a
    store_cache of K and V rows of 4 fp32 per token (32 B per token: 3,200 B) and a second
    GEMM kernel launched inside `operator`: aten::addmm leaves the estimate at 512 + 3,200 =
    3,712 B (its own weight has no shapes here); a fused MoE's weights cannot be sized."""
    name = "execute_2_context_0(sq0sk0sqsq0sqsk0)_generation_2(sq2sk100sqsq2sqsk100)"
    events = [
        cpu_op(name, 0, 100, cat="user_annotation"),
        cpu_op("aten::mm", 10, 10, ext=1, **{"Input Dims": [[2, 8], [8, 16]],
                                             "Input type": ["float", "float"]}),
        runtime(12, 2, corr=1, ext=1), kernel(200, 5, corr=1, ext=1),
        cpu_op("sglang::store_cache", 30, 5, ext=2, **{"Input Dims": [[2, 4], [2, 4]],
                                                       "Input type": ["float", "float"]}),
        cpu_op(operator, 40, 10, ext=3), runtime(42, 2, corr=3, ext=3),
        kernel(210, 5, corr=3, ext=3, name="Cijk_gemm_other"),
    ]
    row = build_inference(make_table(events, tmp_path))["steps"][0]
    assert (row["bytes"], row["bytes_reason"]) == expected


def test_counts_are_bounded():
    """A count of 15 digits is read (exact in float64); one of 16 digits makes the name no
    step name, so a hostile annotation cannot overflow the step table."""
    ok, too_long = "9" * 15, "9" * 16
    assert parse_step_name(f"step[DECODE bs={ok}]")["requests"] == int(ok)
    assert parse_step_name(f"step[DECODE bs={too_long}]") is None
    name = "execute_{n}_context_1(sq1sk1sqsq1sqsk1)_generation_0(sq0sk0sqsq0sqsk0)"
    assert parse_step_name(name.format(n=ok))["tokens"] == int(ok)
    assert parse_step_name(name.format(n=too_long)) is None
    assert parse_step_name(f"execute_context_1({too_long})_generation_0(0)") is None


def test_hostile_counts_answer(tmp_path):
    """Huge counts in a trace: the 15-digit one is a step, the 400-digit one is not; the view
    answers with the one step."""
    events = [cpu_op("step[DECODE bs=" + "9" * 400 + "]", 0, 10, cat="user_annotation"),
              cpu_op("step[DECODE bs=" + "9" * 15 + "]", 20, 10, cat="user_annotation")]
    payload = build_view(make_table(events, tmp_path), "inference")
    assert [s["requests"] for s in payload["steps"]] == [999_999_999_999_999]
