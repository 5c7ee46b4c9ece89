"""The what-if engine: the edit grammar at its boundaries, hand-derived replays of a small step
(each dependency kind moves what follows it), the steady-state device bound, and on every real
trace: the unedited replay reproduces each step exactly, factors of 1 change nothing, and
shortening anything never makes a step longer."""

from __future__ import annotations

import pytest

from tb_plugin.analysis.whatif import EditError, build_whatif, parse_edits
from tb_plugin.analysis.whatif.engine import MAX_STEPS
from tb_plugin.load import load_trace
from tests.support import SAMPLES, SHARED_TRACES, needs_shared

from .helpers import cpu_op, kernel, make_table, memcpy, runtime, step

SYNC = "cudaDeviceSynchronize"
K2 = "void big_kernel<float>()"


def _step_trace() -> list[dict]:
    """One step [0, 1000) on the main thread:
    aten::mm [40, 70) launches K1 (call [50, 60), kernel [100, 300): slack 40);
    preprocess [70, 400) is host compute; sync A [400, 420) finds K1 done (tail 20);
    launch [430, 440) -> K2 [450, 800) (slack 10); sync B [660, 810) waits for K2 (tail 10);
    then 190 us of host time to the step end."""
    return [
        step(1, 0, 1000),
        cpu_op("aten::mm", 40, 30, ext=1), runtime(50, 10, corr=1, ext=1), kernel(100, 200, corr=1),
        cpu_op("preprocess", 70, 330),
        runtime(400, 20, corr=90, name=SYNC),
        runtime(430, 10, corr=2), kernel(450, 350, corr=2, name=K2),
        runtime(660, 150, corr=91, name=SYNC),
    ]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    return make_table(_step_trace(), tmp_path_factory.mktemp("whatif"))


def _predict(table, edit: str) -> float:
    result = build_whatif(table, parse_edits(edit))
    assert [s["replayed_us"] for s in result["steps"]] == [1000.0]
    return result["steps"][0]["predicted_us"]


@pytest.mark.parametrize("edit,predicted", [
    # c2 starts at 70 and now waits for K1 until 300 (+ tail 20): 320; launch 330-340, K2
    # 350-700; sync B starts 340 + 220 = 560, waits to 700, + 10: 710; + 190 = 900
    ("op:preprocess=0", 900.0),
    # K2 [450, 625): sync B (660) no longer waits: 670; + 190 = 860
    (f"kernel:{K2}=0.5", 860.0),
    ("sync=0", 860.0),  # sync B's 140 us of waiting gone
    # c1 [50, 50), K1 [90, 290); sync A 390-410; c3 420-420, K2 [430, 780); sync B starts 640,
    # waits 140, + 10: 790; + 190 = 980
    ("launch=0", 980.0),
    # aten::mm's host time (10 before and 10 after c1) and its call and kernel removed:
    # c1 at 40, K1 [80, 80); sync A 370-390; c3 400-410; K2 [420, 770); sync B 630 + 140 +
    # 10 = 780; + 190 = 970
    ("op:aten::mm=0", 970.0),
    ("op:preprocess=1; launch=1; sync=1", 1000.0),
    # the edits compose: preprocess gone and K2 halved: K2 [350, 525), sync B 560 -> 570; 760
    (f"op:preprocess=0; kernel:{K2}=0.5", 760.0),
])
def test_hand_derived_replays(table, edit, predicted):
    assert _predict(table, edit) == pytest.approx(predicted)


def test_a_dataloader_in_the_last_gap_shortens_the_step(tmp_path):
    events = _step_trace() + [cpu_op(
        "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 850, 100)]
    assert _predict(make_table(events, tmp_path), "dataloader=0") == pytest.approx(900.0)


@pytest.mark.parametrize("host_end,factor,predicted", [
    (600, 1.0, 600.0), (600, 2.0, 1000.0),  # kernel 500 -> 1000 us bounds the step
    (300, 1.0, 300.0), (300, 2.0, 800.0),  # 200 us of it was carried into the next step
])
def test_the_busiest_device_bounds_a_steady_state_step(tmp_path, host_end, factor, predicted):
    events = [step(1, 0, host_end), runtime(10, 10, corr=1), kernel(30, 500, corr=1)]
    result = build_whatif(make_table(events, tmp_path), parse_edits(f"kernel~gemm={factor}"))
    assert result["steps"][0]["predicted_us"] == pytest.approx(predicted)


def test_a_cpu_only_step_is_its_host_time(tmp_path):
    events = [step(1, 0, 1000), cpu_op("aten::mm", 100, 300), cpu_op("host_sleep", 500, 300)]
    table = make_table(events, tmp_path)
    assert _predict(table, "op:host_sleep=0") == pytest.approx(700.0)
    assert _predict(table, "op~^aten::=0.5") == pytest.approx(850.0)
    assert _predict(table, "op~.=0") == pytest.approx(400.0)  # never the step marker itself


@pytest.mark.parametrize("text,message", [
    ("", "no edit"), ("bogus=1", "unknown target"), ("op=0.5", "needs a name"),
    ("launch:x=0", "takes no a name"), ("launch=abc", "not a number"),
    ("launch=100.001", "outside"), ("launch=-0.001", "outside"), ("launch=nan", "outside"),
    ("op~(=0", "bad regular expression"), ("launch", "TARGET=FACTOR"),
    (";".join(["launch=1"] * 17), "at most 16"),
])
def test_bad_edits_say_why(text, message):
    with pytest.raises(EditError, match=message.replace("(", r"\(")):
        parse_edits(text)


def _refusal(text: str) -> str | None:
    """The EditError message for `text`, None when it is accepted (so that a bound moved to the
    wrong side fails an assertion, not with an exception)."""
    try:
        parse_edits(text)
    except EditError as exc:
        return str(exc)
    return None


def test_edit_bounds_are_inclusive():
    """Factors in [0, MAX_FACTOR=100], at most MAX_EDITS=16 edits: each bound on both sides."""
    assert _refusal("launch=0") is None and _refusal("sync=100") is None
    assert "outside [0, 100]" in (_refusal("sync=100.5") or "")
    assert "outside [0, 100]" in (_refusal("launch=-0.5") or "")
    assert _refusal(";".join(["launch=1"] * 16)) is None
    assert "at most 16" in (_refusal(";".join(["launch=1"] * 17)) or "")
    assert [e.factor for e in parse_edits("launch=0; sync=100")] == [0.0, 100.0]
    assert len(parse_edits(";".join(["launch=1"] * 16))) == 16
    edit = parse_edits("op:aten::mm=0.5")[0]
    assert edit.matches("aten::mm") and not edit.matches("aten::mm_backward")
    assert parse_edits("op~^aten::mm=0.5")[0].matches("aten::mm_backward")
    assert str(parse_edits(" kernel~gemm = 0.25 ")[0]) == "kernel~gemm=0.25"


def test_unknown_step(table):
    with pytest.raises(LookupError, match="no step '9'"):
        build_whatif(table, parse_edits("launch=0"), "9")
    assert [s["step"] for s in build_whatif(table, parse_edits("launch=0"), "1")["steps"]] == [
        "1"]


def test_payload_of_one_step_every_key(table):
    # "sync=0": sync B's 140 us of waiting gone (see the replays above); launch=1 changes nothing
    assert build_whatif(table, parse_edits("sync=0; launch=1")) == {
        "edits": ["sync=0", "launch=1"], "original_us": 1000.0, "predicted_us": 860.0,
        "saving_us": 140.0, "saving_pct": 14.0, "notes": [],
        "steps": [{"step": "1", "original_us": 1000.0, "predicted_us": 860.0,
                   "saving_us": 140.0, "saving_pct": 14.0, "replayed_us": 1000.0,
                   "wait_us": 140.0, "predicted_wait_us": 0.0, "calls": 4,
                   "device_events": 2}]}
    assert str(pytest.raises(LookupError, build_whatif, table, parse_edits("launch=0"), "2")
               .value) == "no step '2': the steps are 1"


def test_no_step_and_at_most_max_steps(tmp_path):
    empty = build_whatif(make_table([], tmp_path), parse_edits("sync=0"))
    assert empty == {"edits": ["sync=0"], "original_us": 0.0, "predicted_us": 0.0,
                     "saving_us": 0.0, "saving_pct": 0.0, "steps": [],
                     "notes": ["the trace has no step to replay"]}
    # steps of 100 us, each with 50 us of op "x" inside: x=0.5 saves 25 us a step
    events = [e for i in range(MAX_STEPS + 2)
              for e in (step(i, i * 100, 100), cpu_op("x", i * 100 + 10, 50))]
    many = build_whatif(make_table(events, tmp_path), parse_edits("op:x=0.5"))
    assert many["notes"] == [f"the first {MAX_STEPS} of {MAX_STEPS + 2} steps are replayed"]
    assert [s["step"] for s in many["steps"]] == [str(i) for i in range(MAX_STEPS)]
    assert (many["original_us"], many["predicted_us"], many["saving_pct"]) == (100.0, 75.0, 25.0)
    exact = build_whatif(make_table(events[:2 * MAX_STEPS], tmp_path), parse_edits("op:x=0.5"))
    assert exact["notes"] == [] and len(exact["steps"]) == MAX_STEPS
    one = build_whatif(make_table(events, tmp_path), parse_edits("op:x=0.5"), str(MAX_STEPS + 1))
    assert one["notes"] == [] and [s["step"] for s in one["steps"]] == [str(MAX_STEPS + 1)]


def _real_traces() -> list:
    shared = sorted(p for p in SHARED_TRACES.glob("**/*.pt.trace.json*")
                    if "memory_timeline" not in p.name) if SHARED_TRACES.is_dir() else []
    return shared


SHORTER = ["launch=0.5", "sync=0", "dataloader=0", "kernel~.=0.5", "communication=0",
           "memcpy=0", "op~^aten::=0.5"]


def _check_replays(path) -> None:
    table = load_trace(str(path), use_cache=False)
    same = build_whatif(table, parse_edits("launch=1; sync=1; kernel~.=1; op~.=1"))
    for s in same["steps"]:
        assert s["replayed_us"] == pytest.approx(s["original_us"], abs=1e-6), (path, s)
        assert s["predicted_us"] == pytest.approx(s["original_us"], abs=1e-6), (path, s)
    for edit in SHORTER:
        for s in build_whatif(table, parse_edits(edit))["steps"]:
            assert s["predicted_us"] <= s["original_us"] + 1e-6, (path, edit, s)


@needs_shared
def test_replays_of_every_shared_trace():
    paths = _real_traces()
    assert paths
    for path in paths:
        _check_replays(path)


@pytest.mark.parametrize("run", ["cnn_bs32", "ddp_gloo", "compiled_cpu"])
def test_replays_of_the_samples(run):
    paths = sorted((SAMPLES / run).glob("*.pt.trace.json.gz"))
    assert paths
    for path in paths:
        _check_replays(path)


@pytest.mark.parametrize("device_event, edit", [
    (memcpy(30, 100, corr=1), "memcpy=0"),
    (kernel(30, 100, corr=1, name="ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"),
     "communication=0"),
])
def test_removing_the_waited_for_device_work(tmp_path, device_event, edit):
    """Step [0,1000): a launch [10,20) starts 100 us of device work at 30; a synchronize
    [40,140) waits for it until 130 (tail 10). Without that work the synchronize returns
    after its tail: [40,50), 90 us earlier: 910."""
    events = [step(1, 0, 1000), runtime(10, 10, corr=1, name="cudaMemcpyAsync"), device_event,
              runtime(40, 100, corr=90, name=SYNC)]
    table = make_table(events, tmp_path)
    assert _predict(table, edit) == pytest.approx(910.0)
    other = "communication=0" if edit == "memcpy=0" else "memcpy=0"
    assert _predict(table, other) == pytest.approx(1000.0)  # the other kind: nothing changes


def test_a_driver_call_inside_a_runtime_call_is_not_a_call_of_its_own(tmp_path):
    """cudaLaunchKernel [10,20) holds the driver's cuLaunchKernel [12,15) (same correlation):
    one call, the outer. With cudaLaunchKernel [50,55) launching nothing and cudaMalloc on
    another thread: 3 calls. launch=0 removes the launching call's 10 us: the thread's end
    moves from 100 to 90; the call without device work keeps its 5 us."""
    table = make_table([step(1, 0, 100), runtime(10, 10, corr=1),
                        runtime(12, 3, corr=1, name="cuLaunchKernel", cat="cuda_driver"),
                        kernel(30, 10, corr=1), runtime(50, 5, corr=2),
                        runtime(50, 5, corr=3, name="cudaMalloc", tid=2)], tmp_path)
    [row] = build_whatif(table, parse_edits("launch=0"))["steps"]
    assert (row["calls"], row["device_events"], row["predicted_us"]) == (3, 1, 90.0)
