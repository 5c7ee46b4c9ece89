"""The view registry (`tb_plugin.views`): every spec is served, documented and offered by the
CLI, and options are read from text with one set of rules and messages."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any, Optional

import msgspec
import pytest
import yaml
from tensorboard.plugins import base_plugin

from tb_plugin.ingest.schema import MAX_TIME_US
from tb_plugin.server.plugin import CATCH_ALL, TorchProfPlugin
from tb_plugin.views import openapi
from tb_plugin.views.errors import OptionError
from tb_plugin.views.operators.options import OperatorStackOptions
from tb_plugin.views.options import option_fields, read_options
from tb_plugin.views.ranks.options import RanksOptions
from tb_plugin.views.registry import SPECS
from tb_plugin.views.spec import fingerprint_of
from tb_plugin.views.tabs import VIEWS, view_specs
from tb_plugin.views.trace.options import RangeOptions, SearchOptions, TimelineOptions
from tb_plugin.views.yaml_out import dump

OPENAPI = Path(__file__).resolve().parents[1] / "tb_plugin" / "openapi.yaml"


def _apps() -> dict[str, Any]:
    context = base_plugin.TBContext(logdir="/nonexistent", flags=argparse.Namespace(
        logdir="/nonexistent", logdir_spec=""))
    return TorchProfPlugin(context).get_plugin_apps()


def test_every_spec_route_is_served_once_and_names_a_view() -> None:
    apps = _apps()
    routes = [spec.route for spec in SPECS.values()]
    assert len(set(routes)) == len(routes)
    assert set(routes) <= set(apps) and CATCH_ALL in apps and "/viewspecs" in apps
    assert {spec.view for spec in SPECS.values()} == set(VIEWS)
    assert all(spec.name == name for name, spec in SPECS.items())


def test_viewspecs_answer() -> None:
    assert view_specs() == {"views": [
        {"name": "Overview", "order": 1, "run_level": False},
        {"name": "Operator", "order": 2, "run_level": False},
        {"name": "Kernel", "order": 3, "run_level": False},
        {"name": "Trace", "order": 4, "run_level": False},
        {"name": "Memory", "order": 5, "run_level": False},
        {"name": "Distributed", "order": 6, "run_level": True},
        {"name": "Module", "order": 7, "run_level": False},
        {"name": "Diff", "order": 8, "run_level": True},
        {"name": "GPU Idle", "order": 9, "run_level": False},
        {"name": "Inference", "order": 10, "run_level": False}]}


def test_committed_openapi_is_the_generated_one() -> None:
    assert OPENAPI.read_text() == dump(openapi.document()), (
        "regenerate: python -m tb_plugin.views.openapi > tb_plugin/openapi.yaml")


def test_openapi_parameters_follow_the_option_structs() -> None:
    document = yaml.safe_load(OPENAPI.read_text())
    assert document["openapi"] == "3.1.0"
    for spec in SPECS.values():
        parameters = document["paths"][spec.route]["get"]["parameters"]
        inline = {p["name"]: p for p in parameters if "name" in p}
        for field in option_fields(spec.options):
            assert inline[field.param]["required"] is field.required, (spec.route, field)
        has_csv = {"$ref": "#/components/parameters/format"} in parameters
        assert has_csv == (spec.rows is not None), spec.route
    width = {p["name"]: p for p in document["paths"]["/timeline"]["get"]["parameters"]
             if "name" in p}["width"]["schema"]
    assert width == {"type": "integer", "minimum": 1, "maximum": 16384, "default": 2000}
    group = {p["name"]: p for p in document["paths"]["/kernels"]["get"]["parameters"]
             if "name" in p}["group_by"]["schema"]
    assert group == {"type": "string", "enum": ["kernel", "kernel_op_launch"],
                     "default": "kernel"}


def _read(options: type[msgspec.Struct], **given: str) -> Any:
    def lookup(name: str) -> Optional[str]:
        return given.get(name)

    return read_options(options, lookup)


def test_options_read_from_text() -> None:
    assert _read(TimelineOptions) == TimelineOptions(None, None, 2000)
    assert _read(TimelineOptions, start_us="1.5", width="7") == TimelineOptions(1.5, None, 7)
    assert _read(SearchOptions, q="relu", limit="3").limit == 3
    stack = _read(OperatorStackOptions, name="aten::mm", group_by="operator_input_shape")
    assert (stack.name, stack.group_by, stack.input_shape) == (
        "aten::mm", "operator_input_shape", None)


@pytest.mark.parametrize("options, given, message", [
    (TimelineOptions, {"width": "0"},
     "parameter 'width' must be an integer from 1 to 16384; got '0'"),
    (TimelineOptions, {"width": "16385"},
     "parameter 'width' must be an integer from 1 to 16384; got '16385'"),
    (TimelineOptions, {"width": "1.5"},
     "parameter 'width' must be an integer from 1 to 16384; got '1.5'"),
    (TimelineOptions, {"width": "\u00b2"},
     "parameter 'width' must be an integer from 1 to 16384; got '\u00b2'"),
    (TimelineOptions, {"start_us": "nan"}, "parameter 'start_us' must be a finite number; "
                                           "got 'nan'"),
    (SearchOptions, {}, "missing parameter 'q'"),
    (OperatorStackOptions, {"name": "x", "group_by": "kernel"},
     "parameter 'group_by' must be one of operator, operator_input_shape; got 'kernel'"),
])
def test_bad_options_name_the_parameter(options: type[msgspec.Struct], given: dict[str, str],
                                        message: str) -> None:
    with pytest.raises(OptionError) as error:
        _read(options, **given)
    assert str(error.value) == message


RANKS_HELP = ("Comma-separated ranks to stack (at most 8, e.g. `0,3`); default the first 8.")


def test_text_options_pattern_and_length_at_their_bounds() -> None:
    """A text option with a `pattern` must match it whole, and one with `max_length` is at most
    that long; both sides of each bound (issue 32: `ranks=abc` was a 500)."""
    assert _read(RanksOptions, ranks="0,1,2,3,4,5,6,7").ranks == "0,1,2,3,4,5,6,7"  # 8 ranks
    assert _read(RanksOptions, ranks="123456789").ranks == "123456789"  # 9 digits
    assert _read(RanksOptions, offsets="1:-85.5,3:12").offsets == "1:-85.5,3:12"
    assert _read(RangeOptions, start_us="0", end_us="1", tracks="0,3").tracks == "0,3"
    for bad in ("0,1,2,3,4,5,6,7,8", "1234567890", "abc", "0,,1", "0,", "0\n", " 0", "-1",
                "\u0661"):
        with pytest.raises(OptionError) as error:
            _read(RanksOptions, ranks=bad)
        assert str(error.value) == (f"parameter 'ranks' is malformed ({RANKS_HELP}); "
                                    f"got {bad!r}"), bad
    with pytest.raises(OptionError, match="parameter 'offsets' is malformed"):
        _read(RanksOptions, offsets="1:2:3")
    with pytest.raises(OptionError, match="parameter 'tracks' is malformed"):
        _read(RangeOptions, start_us="0", end_us="1", tracks="a")
    assert _read(TimelineOptions, critical_step="s" * 200).critical_step == "s" * 200
    with pytest.raises(OptionError) as error:
        _read(TimelineOptions, critical_step="s" * 201)
    assert str(error.value) == "parameter 'critical_step' is longer than 200 characters"


@pytest.mark.parametrize("name", ["start_us", "end_us"])
def test_ranks_window_is_bounded_like_every_request_time(name: str) -> None:
    """`/ranks` windows take +-MAX_TIME_US (1e17 us) like the other views; beyond is a 400
    (issue 32: `end_us=1e308` was a 500)."""
    for edge in (MAX_TIME_US, -MAX_TIME_US):
        assert getattr(_read(RanksOptions, **{name: repr(edge)}), name) == edge
    for beyond in ("1.0000000000000002e17", "-1.0000000000000002e17", "1e308", "-1e308"):
        with pytest.raises(OptionError) as error:
            _read(RanksOptions, **{name: beyond})
        assert str(error.value) == (f"parameter {name!r} must be a number from -1e+17 to 1e+17; "
                                    f"got {beyond!r}")


def test_the_code_fingerprint_covers_sub_packages(tmp_path: Path) -> None:
    """Cached payloads are keyed by the code that made them: a change in a view's folder or an
    analysis sub-package (not only a top-level module) makes a new fingerprint."""
    package = Path(__file__).resolve().parents[1] / "tb_plugin"
    copy = tmp_path / "tb_plugin"
    for folder in ("analysis", "ingest", "output", "views"):
        shutil.copytree(package / folder, copy / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    before = fingerprint_of(copy)
    assert fingerprint_of(copy) == before
    for nested in (copy / "views" / "gpu_idle" / "spec.py",
                   copy / "analysis" / "whatif" / "simulate.py"):
        original = nested.read_bytes()
        nested.write_bytes(original + b"\n# edited\n")
        assert fingerprint_of(copy) != before, nested
        nested.write_bytes(original)
        assert fingerprint_of(copy) == before
    (copy / "views" / "gpu_idle" / "spec.py").rename(copy / "views" / "gpu_idle" / "spec2.py")
    assert fingerprint_of(copy) != before  # a moved module is a change too
