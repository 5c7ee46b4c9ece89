"""The view registry (`tb_plugin.views`): every spec is served, documented and offered by the
CLI, and options are read from text with one set of rules and messages."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Optional

import msgspec
import pytest
import yaml
from tensorboard.plugins import base_plugin

from tb_plugin.server.plugin import CATCH_ALL, TorchProfPlugin
from tb_plugin.views import openapi
from tb_plugin.views.errors import OptionError
from tb_plugin.views.option_types import OperatorStackOptions, SearchOptions, TimelineOptions
from tb_plugin.views.options import option_fields, read_options
from tb_plugin.views.registry import SPECS
from tb_plugin.views.tabs import VIEWS, view_specs
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
        {"name": "GPU Idle", "order": 9, "run_level": False}]}


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
