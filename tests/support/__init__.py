"""What every test layer shares: where the repository, samples and shared real traces live,
the `needs_shared` marker, the torch requirement, and one TensorBoard launcher (launcher.py).

Missing inputs skip on a developer machine but fail in CI:
- `REQUIRE_SHARED=1`: a test marked `needs_shared` fails (instead of skipping) when
  `../shared/traces` is absent, and so does the whole session (see tests/conftest.py);
- `REQUIRE_TORCH=1`: `import_torch()` fails (instead of skipping) when torch is not installed;
- `REQUIRE_BROWSER=1`: the browser lane (tests/ui) fails when chromium is missing.
`.ci/run` sets all three. Every other missing input goes through `need()`, so no hand-written
skip escapes them: inputs the repository ships (samples/) are never skipped at all.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType
from typing import Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
SHARED_TRACES = REPO.parent / "shared" / "traces"
REQUIRE_SHARED_ENV = "REQUIRE_SHARED"
REQUIRE_TORCH_ENV = "REQUIRE_TORCH"
REQUIRE_BROWSER_ENV = "REQUIRE_BROWSER"

#: Marks a test that reads ../shared/traces; tests/conftest.py skips or fails it when absent.
needs_shared = pytest.mark.needs_shared


def _required(variable: str) -> bool:
    return os.environ.get(variable, "") == "1"


def shared_missing_message() -> str:
    return (f"{SHARED_TRACES} is missing (the shared real traces; {REQUIRE_SHARED_ENV}=1 makes "
            "this a failure, as in CI)")


def check_shared() -> None:
    """Skip (developer machine) or fail (`REQUIRE_SHARED=1`) when the shared traces are absent."""
    if SHARED_TRACES.is_dir():
        return
    if _required(REQUIRE_SHARED_ENV):
        pytest.fail(shared_missing_message(), pytrace=False)
    pytest.skip(f"{SHARED_TRACES} absent")


def need(present: bool, what: str, variable: str = REQUIRE_SHARED_ENV) -> None:
    """Go on when an input is `present`; else skip on a developer machine, or fail when
    `variable`=1 (CI), so that an absent input never reads as a pass."""
    if present:
        return
    if _required(variable):
        pytest.fail(f"{what} is missing and {variable}=1", pytrace=False)
    pytest.skip(f"{what} is missing")


def need_shipped(present: bool, what: str) -> None:
    """Inputs the repository itself ships (samples/, a property of a sample) are never
    skipped: their absence is a broken checkout or a changed sample, a failure everywhere."""
    if not present:
        pytest.fail(f"{what} is missing from the repository's own inputs", pytrace=False)


_LAYER: dict[str, Optional[str]] = {"current": None}


def enter_layer(layer: Optional[str]) -> None:
    """Called by tests/conftest.py before each test with the layer it was given."""
    _LAYER["current"] = layer


def refuse_in_unit(what: str) -> None:
    """The unit lane is in-process: starting `what` there means the test is mislabelled."""
    if _LAYER["current"] == "unit":
        raise RuntimeError(f"a unit test started {what}: give it the e2e layer "
                           "(tests/conftest.py: E2E_FILES, SERVER_FIXTURES or pytest.mark.e2e)")


def shared_required_but_missing() -> bool:
    return _required(REQUIRE_SHARED_ENV) and not SHARED_TRACES.is_dir()


def import_torch() -> ModuleType:
    """`import torch`; a skip without it, unless `REQUIRE_TORCH=1` (CI) makes that a failure."""
    refuse_in_unit("torch")
    try:
        return importlib.import_module("torch")
    except ImportError as error:
        if _required(REQUIRE_TORCH_ENV):
            pytest.fail(f"torch is not importable ({error}) and {REQUIRE_TORCH_ENV}=1",
                        pytrace=False)
        pytest.skip(f"torch is not installed ({error})")


def shared_trace_files() -> list[Path]:
    """Every worker trace file in ../shared/traces (empty when it is absent: parametrized tests
    then collect nothing, which `REQUIRE_SHARED=1` turns into a session error)."""
    if not SHARED_TRACES.is_dir():
        return []
    return sorted(p for p in SHARED_TRACES.glob("*/*.json.gz") if ".raw." not in p.name)
