"""Operator view (spec 1.2, 3.7): table, pies, call stacks; cross-checked with torch.profiler."""

from __future__ import annotations

import hashlib
import json

import pytest

from tb_plugin.analysis.operators import (
    UnknownOperatorError,
    build_call_stacks,
    build_operator_pies,
    build_operators,
)
from tb_plugin.analysis.optree import build_op_tree
from tb_plugin.load import load_trace
from tests.support import SHARED_TRACES, import_torch, needs_shared

from .helpers import cpu_op, make_table
from .legacy_events import kernel, op, runtime

SHARED = str(SHARED_TRACES)
RESNET = f"{SHARED}/resnet50_gpu_pt19/worker0.1623143089861.pt.trace.json.gz"
TO_SHAPE = "[[2, 8, 5], [], [], [], [], [], [], []]"
NLL_SHAPE = "[[], [32, 1000], [32], [], [], [], []]"


def all_categories_table(tmp_path):
    """test_all_categories' trace (spec 3.6 worked example)."""
    def shaped(name, ts, dur, ext, tid, dims):
        return {**op(name, ts, dur, ext, tid=tid), "args": {"Input Dims": dims,
                                                            "External id": ext}}

    nll = "void cunn_ClassNLLCriterion_updateGradInput_kernel<float>"
    events = [
        op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 100, 180, 2, tid="123"),
        shaped("aten::to", 200, 60, 3, "123", [[2, 8, 5], [], [], [], [], [], [], []]),
        shaped("aten::nll_loss_backward", 340, 70, 4, "456", [[], [32, 1000], [32], [], [], [],
                                                               []]),
        op("ProfilerStep#1", 50, 400, 1, tid="123"),
        {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0,
         "tid": "stream 7", "ts": 405, "dur": 10,
         "args": {"stream": 7, "correlation": 334, "external id": 4}},
        runtime(360, 20, 334, 4, name="cudaMemcpyAsync"),
        {"ph": "X", "cat": "Memset", "name": "Memset (Device)", "pid": 0, "tid": "stream 7",
         "ts": 420, "dur": 5, "args": {"stream": 7, "correlation": 40344, "external id": 4}},
        runtime(390, 10, 40344, 4, name="cudaMemsetAsync"),
        kernel(430, 15, 40348, 4, name=nll), runtime(405, 5, 40348, 4),
    ]
    return make_table(events, tmp_path)


@pytest.mark.parametrize("group_by", ["operator", "operator_input_shape"])
def test_all_categories_operators(tmp_path, group_by):
    result = build_operators(all_categories_table(tmp_path), group_by)
    assert result["has_device"] and result["sort_by"] == "device_self_us"
    rows = {r["name"]: r for r in result["rows"]}
    assert list(rows) == ["aten::nll_loss_backward", "aten::to"]
    to, nll = rows["aten::to"], rows["aten::nll_loss_backward"]
    assert (to["calls"], to["host_total_us"], to["device_total_us"], to["host_self_us"],
            to["device_self_us"]) == (1, 60, 0, 60, 0)
    assert (nll["calls"], nll["host_total_us"], nll["device_total_us"], nll["host_self_us"],
            nll["device_self_us"]) == (1, 70, 30, 70 - 20 - 10 - 5, 30)
    if group_by == "operator_input_shape":
        assert (to["input_shape"], nll["input_shape"]) == (TO_SHAPE, NLL_SHAPE)
    else:
        assert "input_shape" not in to
    # aten::to by its name; aten::nll_loss_backward matches no rule: its own device time is
    # memcpy 10 + memset 5 = 15 against its kernel's 15 (other): the tie goes to the earlier
    # category, memcpy/memset
    assert (to["category"], nll["category"]) == ("elementwise", "memcpy/memset")
    assert list(to) == ["name", *(["input_shape"] if "input_shape" in to else []), "category",
                        "calls",
                        "host_self_us", "host_total_us", "device_self_us", "device_total_us",
                        "tc_eligible", "tc_self_pct", "tc_total_pct", "has_call_stack"]


def test_runtime_called_by_profilerstep_is_not_an_operator(tmp_path):
    events = [op("ProfilerStep#1", 100, 300, 2), runtime(130, 20, 335, 2), kernel(220, 8, 335, 2)]
    assert build_operators(make_table(events, tmp_path))["rows"] == []


def test_sorted_by_host_self_without_device_work(tmp_path):
    events = [op("b", 0, 10, 1), op("a", 20, 10, 2), op("c", 40, 30, 3)]
    result = build_operators(make_table(events, tmp_path))
    assert (result["sort_by"], result["has_device"]) == ("host_self_us", False)
    assert [r["name"] for r in result["rows"]] == ["c", "a", "b"]


def stack_table(tmp_path):
    def with_stack(ts, ext, dims, stack):
        event = op("aten::mm", ts, 10, ext)
        event["args"].update({"Input Dims": dims, **({"Call stack": stack} if stack else {})})
        return event

    events = [with_stack(0, 1, [[2, 3]], "a.py(1): f;b.py(2): g"),
              with_stack(20, 2, [[2, 3]], "a.py(1): f;b.py(2): g"),
              with_stack(40, 3, [[4, 5]], "c.py(9): h"), with_stack(60, 4, [[4, 5]], None),
              op("aten::add", 80, 5, 5)]
    return make_table(events, tmp_path)


def test_call_stacks(tmp_path):
    table = stack_table(tmp_path)
    rows = {r["name"]: r for r in build_operators(table)["rows"]}
    assert rows["aten::mm"]["has_call_stack"] and not rows["aten::add"]["has_call_stack"]
    stacks = build_call_stacks(table, "aten::mm")["rows"]
    assert [(r["call_stack"], r["calls"], r["host_total_us"]) for r in stacks] == [
        ("a.py(1): f;b.py(2): g", 2, 20), ("c.py(9): h", 1, 10)]
    shaped = build_call_stacks(table, "aten::mm", "[[4, 5]]", "operator_input_shape")["rows"]
    assert [(r["input_shape"], r["call_stack"], r["calls"]) for r in shaped] == [
        ("[[4, 5]]", "c.py(9): h", 1)]
    assert build_call_stacks(table, "aten::add")["rows"] == []


def test_unknown_operator_raises_a_key_error(tmp_path):
    table = stack_table(tmp_path)
    with pytest.raises(UnknownOperatorError):
        build_call_stacks(table, "aten::nope")
    with pytest.raises(KeyError):
        build_call_stacks(table, "aten::mm", "[[9]]", "operator_input_shape")


def test_invalid_group_by(tmp_path):
    table = stack_table(tmp_path)
    for call in (build_operators, build_operator_pies):
        with pytest.raises(ValueError):
            call(table, group_by="Operation")


def test_pies(tmp_path):
    pies = build_operator_pies(all_categories_table(tmp_path), top_n=1)
    assert pies["device_total"] == [{"name": "aten::nll_loss_backward", "value": 30}]
    assert pies["host_self"] == [{"name": "aten::to", "value": 60}]
    host_only = build_operator_pies(stack_table(tmp_path), top_n=None)
    assert host_only["device_self"] is None and host_only["device_total"] is None
    assert host_only["host_total"] == [{"name": "aten::mm", "value": 40},
                                       {"name": "aten::add", "value": 5}]


def test_shape_pies_label_each_shape(tmp_path):
    """The reference labelled every shape of an op by its name alone (duplicate labels)."""
    pies = build_operator_pies(stack_table(tmp_path), group_by="operator_input_shape")
    labels = [entry["name"] for entry in pies["host_total"]]
    assert labels == ["aten::mm [[2, 3]]", "aten::mm [[4, 5]]", "aten::add []"]


@needs_shared
def test_resnet50_golden_operator_table():
    """Golden: 76 rows grouped by operator on resnet50_gpu_pt19 span 1, the reference's values."""
    table = load_trace(RESNET, use_cache=False)
    result = build_operators(table)
    rows = {r["name"]: r for r in result["rows"]}
    assert len(result["rows"]) == 76 and result["sort_by"] == "device_self_us"
    golden = {  # calls, device self, device total, host self, host total, TC eligible, stack
        "aten::cudnn_convolution_backward_weight": (318, 142461, 142461, 22804, 40246, True,
                                                    False),
        "aten::cudnn_convolution": (318, 126619, 126619, 33121, 56998, True, True),
        "aten::max_pool2d_with_indices_backward": (6, 3822, 4677, 176, 411, False, False),
        "aten::empty": (4404, 0, 0, 68147, 68147, False, True),
        "aten::to": (414, 0, 11492, 14834, 64332, False, True),
        "aten::zero_": (996, 0, 1881, 10693, 27597, False, True),
        "aten::linear": (6, 0, 197, 124, 1408, True, True),
        "CudnnConvolutionBackward": (318, 0, 273428, 3217, 90989, True, False),
        "torch::autograd::AccumulateGrad": (966, 0, 3030, 5457, 28494, False, False),
    }
    for name, want in golden.items():
        row = rows[name]
        got = (row["calls"], round(row["device_self_us"]), round(row["device_total_us"]),
               round(row["host_self_us"]), round(row["host_total_us"]), row["tc_eligible"],
               row["has_call_stack"])
        assert got == want, name
    keys = [(-r["device_self_us"], r["name"]) for r in result["rows"]]
    assert keys == sorted(keys)
    shaped = build_operators(table, "operator_input_shape")["rows"]
    assert sum(r["calls"] for r in shaped) == sum(r["calls"] for r in result["rows"])
    pies = build_operator_pies(table, top_n=None)
    assert len(pies["device_self"]) == 23 and len(pies["host_total"]) == 76


def _digest(lines):
    return hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()[:16]


@needs_shared
def test_resnet50_recorded_call_stacks_unchanged():
    """PyTorch 1.x `Call stack` args are used as recorded: the flags and every stack row (both
    groupings) are those computed before 2.x stacks were derived (digests of that output)."""
    table = load_trace(RESNET, use_cache=False)
    ops = build_operators(table)["rows"]
    flagged = [r["name"] for r in ops if r["has_call_stack"]]
    assert (len(flagged), _digest(flagged)) == (52, "018f252887447acc")
    shaped = build_operators(table, "operator_input_shape")["rows"]
    flagged = [f"{r['name']} {r['input_shape']}" for r in shaped if r["has_call_stack"]]
    assert (len(shaped), len(flagged), _digest(flagged)) == (577, 385, "e2139887ed5b0157")
    for rows, group_by, want in ((ops, "operator", (338, "0903d35a47043f3c")),
                                 (shaped, "operator_input_shape", (556, "0495d092c9ee4d62"))):
        lines = [json.dumps([s.get("name"), s.get("input_shape"), s["call_stack"], s["calls"],
                             round(s["host_total_us"], 3), round(s["device_total_us"], 3)])
                 for r in rows
                 for s in build_call_stacks(table, r["name"], r.get("input_shape"),
                                            group_by)["rows"]]
        assert (len(lines), _digest(lines)) == want, group_by
    conv = build_call_stacks(table, "aten::cudnn_convolution")["rows"]
    assert (len(conv), conv[0]["calls"], sum(r["calls"] for r in conv)) == (17, 36, 318)
    assert conv[0]["call_stack"].startswith("/home/yangu/anaconda3/envs/kineto/lib/python3.7/"
                                            "site-packages/torch/nn/modules/conv.py(440): "
                                            "_conv_forward;")

# --- cross-check with torch.profiler -------------------------------------------------------

def _record(tmp_path):
    """A small CPU model, three iterations, plus a custom op that calls itself twice through
    the dispatcher: nested single-child same-name ops, which both sides must collapse."""
    torch = import_torch()  # a failure instead of a skip when REQUIRE_TORCH=1 (CI)
    from torch import nn

    rec = _recursive_op(torch)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(8 * 7 * 7, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                record_shapes=True) as prof:
        for _ in range(3):
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(rec(x, 2)), y)
            loss.backward()
            optimizer.step()
    path = tmp_path / "worker0.pt.trace.json"
    prof.export_chrome_trace(str(path))
    return prof, load_trace(str(path), use_cache=False)


_REC_OP = []


def _recursive_op(torch):
    if not _REC_OP:
        @torch.library.custom_op("torchprof_test::rec", mutates_args=(),
                                 schema="(Tensor x, int depth) -> Tensor")
        def rec(x, depth):
            return x.clone() if depth == 0 else torch.ops.torchprof_test.rec(x, depth - 1)

        _REC_OP.append(rec)
    return _REC_OP[0]


@pytest.mark.e2e  # records with torch
def test_matches_torch_profiler_key_averages(tmp_path):
    """Our operator rows against `prof.key_averages()` on the same recording.

    Which events key_averages counts: every FunctionEvent, i.e. every cpu_op *and* every
    user annotation (record_function ranges such as Optimizer.step#SGD.step), after
    `EventList._remove_dup_nodes` has merged each single child that has its parent's name into
    the parent (torch.autograd.profiler_util; the reference copied this rule). So a chain
    rec -> rec -> rec counts once, with the outer duration as total, exactly like our table.
    Hence the exact-match basis: our `calls` == key_averages' count per name, for every name in
    our table, and everything key_averages lists that we do not is a non-operator (user
    annotation, optimizer step). Should a torch version not merge duplicates, its counts are
    ours plus the merged nodes (`OpTree.absorbed_rows`), which the test accepts as well.
    Times: key_averages' self_cpu_time_total / cpu_time_total (us) come from the same events
    at ns precision, the trace has 3 decimals, so they agree within 1%.
    """
    prof, table = _record(tmp_path)
    from torch.autograd.profiler_util import EventList

    ours = {r["name"]: r for r in build_operators(table)["rows"]}
    theirs = {e.key: e for e in prof.key_averages()}
    tree = build_op_tree(table)
    absorbed = table.events["name"].to_numpy()[tree.absorbed_rows]
    assert "torchprof_test::rec" in ours and len(absorbed) == 6  # 3 iterations x 2 merged
    merges = hasattr(EventList, "_remove_dup_nodes")
    for name, row in ours.items():
        event = theirs[name]
        expected = row["calls"] + (0 if merges else int((absorbed == name).sum()))
        assert event.count == expected, name
        assert row["host_total_us"] == pytest.approx(event.cpu_time_total, rel=0.01, abs=0.01)
        assert row["host_self_us"] == pytest.approx(event.self_cpu_time_total, rel=0.01,
                                                    abs=0.01)
    extra = set(theirs) - set(ours)
    assert all(name.startswith(("Optimizer.", "ProfilerStep#", "enumerate(")) for name in extra)
    assert ours["torchprof_test::rec"]["calls"] == 3


def test_pies_keep_positive_values_ties_by_name_and_round_to_3(tmp_path):
    events = [cpu_op("aten::b", 0, 10.5), cpu_op("aten::a", 20, 10.5),
              cpu_op("aten::c", 40, 3.12345), cpu_op("aten::zero", 50, 0)]
    table = make_table(events, tmp_path)
    pies = build_operator_pies(table, top_n=2)
    assert pies["host_self"] == [{"name": "aten::a", "value": 10.5},
                                 {"name": "aten::b", "value": 10.5}]  # a tie: by name
    assert pies["device_self"] is None and pies["device_total"] is None  # no value > 0
    everything = build_operator_pies(table, top_n=None)["host_total"]
    assert everything == [{"name": "aten::a", "value": 10.5}, {"name": "aten::b", "value": 10.5},
                          {"name": "aten::c", "value": 3.123}]  # not the zero one
    assert build_operator_pies(table, top_n=0)["host_self"] is None
    assert build_operator_pies(table, top_n=-1)["host_self"] is None
    assert len(build_operator_pies(table, top_n=3)["host_self"]) == 3
    rows = {r["name"]: r for r in build_operators(table)["rows"]}
    assert (rows["aten::c"]["host_self_us"], rows["aten::c"]["host_total_us"]) == (3.123, 3.123)
    assert rows["aten::zero"]["calls"] == 1 and rows["aten::zero"]["host_self_us"] == 0
    assert (rows["aten::a"]["tc_self_pct"], rows["aten::a"]["tc_total_pct"]) == (0, 0)
    # without device work the rows sort by host self time, ties by name
    assert [r["name"] for r in build_operators(table)["rows"]] == [
        "aten::a", "aten::b", "aten::c", "aten::zero"]
