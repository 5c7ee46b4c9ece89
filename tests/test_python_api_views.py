"""Every view of the registry has a Python API function (`api_views`: hand-written or
generated from the spec), and the generated ones answer what `torch-prof report` answers.

- enumerating `SPECS`: each view names a callable of `Trace` or `Logdir`; a generated one takes
  exactly the spec's options as keyword arguments, with the spec's defaults;
- each generated table view's DataFrame is, cell for cell, the CSV `report --format csv` prints
  for the same trace and options (and a view without a table returns the JSON `report` prints);
- a bad option is an OptionError naming the bound, an unknown run a NotFoundError.
"""

from __future__ import annotations

import csv
import inspect
import io
import json
from pathlib import Path
from typing import Any

import pytest

from tb_plugin import cli
from tb_plugin.api import HAND_WRITTEN, Logdir, NotFoundError, Trace, open_logdir
from tb_plugin.api_views import generated
from tb_plugin.views.errors import OptionError
from tb_plugin.views.options import option_fields
from tb_plugin.views.registry import SPECS
from tests.support import SAMPLES, SHARED_TRACES, needs_shared

OWNERS = {"Trace": Trace, "Logdir": Logdir}
#: view -> (run, options, experiment run) used below; views not listed take no option needed.
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "operator_pies": ("cnn_bs32", {"group_by": "operator", "top_n": 3}),
    "kernel_pies": ("cnn_bs32", {}),
    "compiled": ("compiled_cpu", {}),
    "roofline": ("cnn_bs32", {}),
    "timeline": ("cnn_bs32", {"width": 300}),
    "timeline_event": ("cnn_bs32", {"event_id": 5}),
    "timeline_search": ("cnn_bs32", {"query": "conv", "limit": 7}),
    "gpu_idle": ("cnn_bs32", {"kernel_wait_us": 20.0}),
    "findings": ("ddp_gloo", {"top": 1}),
    "whatif_run": ("ddp_gloo", {"edit": "straggler=0"}),
    "memory_timeline": ("cnn_bs32", {}),
    "ranks": ("ddp_gloo", {"width": 400}),
    "diff": ("cnn_bs32", {"exp_run": "cnn_bs64"}),
    "diff_kernels": ("cnn_bs32", {"exp_run": "cnn_bs64"}),
}


def test_every_registry_view_has_an_api_function() -> None:
    functions = {**HAND_WRITTEN, **generated()}
    assert set(functions) == set(SPECS)
    for where in functions.values():
        owner, attr = where.split(".")
        assert callable(getattr(OWNERS[owner], attr)), where
    for name, where in generated().items():
        owner, attr = where.split(".")
        parameters = inspect.signature(getattr(OWNERS[owner], attr)).parameters
        options = {p.name: p.default for p in parameters.values()
                   if p.kind == inspect.Parameter.KEYWORD_ONLY}
        fields = option_fields(SPECS[name].options)
        assert options == {f.attr: (inspect.Parameter.empty if f.required else f.default)
                           for f in fields}, name
        assert SPECS[name].summary in (getattr(OWNERS[owner], attr).__doc__ or "")


def _csv_cell(value: Any) -> str:
    """A value as the CSV export writes it (tabular._cell, then csv.writer)."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, (list, dict)):
        value = json.dumps(value)
    if isinstance(value, str) and value.startswith(("=", "+", "-", "@", "\t", "\r")):
        return "'" + value
    return str(value)


def _same(value: Any, cell: str) -> bool:
    """The frame's value is the CSV cell (a number also when the frame made an int a float)."""
    if _csv_cell(value) == cell:
        return True
    try:
        return isinstance(value, (int, float)) and float(cell) == float(value)
    except ValueError:
        return False


def _report(capsys: pytest.CaptureFixture[str], root: Path, name: str, run: str, fmt: str,
            options: dict[str, Any]) -> str:
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in options.items()]
    assert cli.main(["report", str(root), "--run", run, "--view", name, "--format", fmt,
                     *flags]) == 0
    return capsys.readouterr().out


#: Views that need a file samples/ lacks: run on ../shared/traces.
SHARED_CASES = {"memory_snapshot": ("cs336_cuda_snapshots", {}),
                "inference": ("tl_sglang_prefilldecode", {})}


@pytest.mark.parametrize("name", [pytest.param(n, marks=needs_shared) if n in SHARED_CASES
                                  else n for n in sorted(generated())])
def test_generated_functions_answer_what_report_prints(capsys: pytest.CaptureFixture[str],
                                                        name: str) -> None:
    spec = SPECS[name]
    root = SHARED_TRACES if name in SHARED_CASES else SAMPLES
    run, options = SHARED_CASES.get(name) or CASES.get(name, ("cnn_bs32", {}))
    logdir = open_logdir(str(root))
    if name == "timeline_range":  # the whole trace, as the timeline states it
        whole = logdir.trace(run).timeline(width=10)
        options = {"start_us": whole["trace_start_us"], "end_us": whole["trace_end_us"]}
    api_options = {k: v for k, v in options.items() if k != "exp_run"}
    if generated()[name].startswith("Logdir."):
        got = getattr(logdir, name)(run, **api_options)
    elif "exp_run" in options:
        got = getattr(logdir.trace(run), name)(logdir.trace(options["exp_run"]), **api_options)
    else:
        got = getattr(logdir.trace(run), name)(**api_options)
    if spec.rows is None:
        assert got == json.loads(_report(capsys, root, name, run, "json", options))
        return
    rows = list(csv.reader(io.StringIO(_report(capsys, root, name, run, "csv", options))))
    assert list(got.columns) == rows[0]
    assert len(got) == len(rows) - 1
    for mine, theirs in zip(got.itertuples(index=False), rows[1:]):
        assert all(_same(v, cell) for v, cell in zip(mine, theirs)), (mine, theirs)


def test_bad_options_and_names() -> None:
    logdir = open_logdir(str(SAMPLES))
    trace = logdir.trace("cnn_bs32")
    with pytest.raises(OptionError, match="from 1 to 13"):
        trace.findings(top=14)
    assert trace.findings(top=13)["schema_version"] == 1
    with pytest.raises(OptionError, match="not taken by the roofline view"):
        trace.roofline(width=3)
    with pytest.raises(NotFoundError, match="no run 'nope'"):
        logdir.ranks("nope")
    with pytest.raises(OptionError, match="other=Trace"):
        trace.view("diff")
    assert trace.view("findings", top=2) == trace.findings(top=2)
    assert logdir.view("findings", "cnn_bs32", top=2) == trace.findings(top=2)
    with pytest.raises(OptionError, match="exp_run="):
        logdir.view("diff", "cnn_bs32")
    diff = logdir.view("diff", "cnn_bs32", exp_run="cnn_bs64")
    assert diff == trace.view("diff", other=logdir.trace("cnn_bs64"))
