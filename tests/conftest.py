"""Session-wide test setup: the layer markers, the shared-traces requirement, and an isolated
cache per test.

Every test gets exactly one layer marker (registered in pyproject.toml):
- `browser`: tests/ui/ (Chromium and Playwright against real TensorBoard processes);
- `e2e`: a test that starts TensorBoard, Ray or torch: one in E2E_FILES, one in a file that
  starts TensorBoard or the CLI itself (STARTS_PROCESSES), one that uses a fixture of
  SERVER_FIXTURES (a real TensorBoard), or one that declares `pytest.mark.e2e`;
- `unit`: everything else (in-process; `python -m pytest -m unit` is the developer loop).
The label is enforced, not trusted: `tests.support.current_layer` holds the running test's
layer, and the TensorBoard launcher and `import_torch()` refuse to run under `unit`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from pathlib import Path

import pytest

from tb_plugin import cache
from tests.support import (
    REPO,
    check_shared,
    enter_layer,
    shared_missing_message,
    shared_required_but_missing,
)

LAYERS = ("unit", "e2e", "browser")
LAYER_KEY = pytest.StashKey[str]()
BROWSER_DIR = "tests/ui/"
E2E_FILES = frozenset({
    "tests/server/test_http.py",
    "tests/server/test_views_wiring.py",
    "tests/test_recorder.py",
    "tests/cluster/test_ray.py",  # a real local Ray instance (its own processes)
    "tests/cluster/test_ray_client.py",  # a real Ray head (`ray start --head`)
    "tests/test_hostile_cli.py",
    "tests/server/test_hostile_http.py",
    "tests/analysis/test_flops_torch.py",  # torch's FlopCounterMode runs the ops
    "tests/analysis/test_memory_leak_flags.py",  # records with torch.profiler
    "tests/server/test_view_corpus_http.py",
})
#: A test file that starts TensorBoard or the CLI as subprocesses itself is e2e as a whole.
STARTS_PROCESSES = re.compile(r"\brunning_tensorboard\(|\blauncher\.(?:start|running)\("
                              r"|\brun_cli\(")
#: Fixtures that start (or are only needed to start) a real TensorBoard.
SERVER_FIXTURES = frozenset({"tb", "server_env"})


def layer_of(relative_path: str, fixtures: Iterable[str] = (), declared: Iterable[str] = ()
             ) -> str:
    """The layer of a test: its path relative to the repository, the fixtures it uses
    (transitively) and the layer markers it declares itself."""
    if relative_path.startswith(BROWSER_DIR):
        return "browser"
    heavy = (relative_path in E2E_FILES or SERVER_FIXTURES & set(fixtures) or "e2e" in declared
             or _starts_processes(relative_path))
    return "e2e" if heavy else "unit"


@functools.cache
def _starts_processes(relative_path: str) -> bool:
    return bool(STARTS_PROCESSES.search((REPO / relative_path).read_text(encoding="utf-8")))


def pytest_configure(config: pytest.Config) -> None:
    if shared_required_but_missing():  # CI: a missing ../shared must never read as skips
        raise pytest.UsageError(shared_missing_message())


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        relative = Path(str(item.fspath)).resolve().relative_to(REPO).as_posix()
        declared = {m.name for m in item.iter_markers() if m.name in LAYERS}
        layer = layer_of(relative, getattr(item, "fixturenames", ()), declared)
        for marker in item.own_markers[:]:  # exactly one layer marker, the derived one
            if marker.name in LAYERS:
                item.own_markers.remove(marker)
        item.add_marker(getattr(pytest.mark, layer))
        item.stash[LAYER_KEY] = layer


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    enter_layer(item.stash.get(LAYER_KEY, None))
    if item.get_closest_marker("needs_shared") is not None:
        check_shared()


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Never read or write the user's real cache from tests."""
    root = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(root))
    monkeypatch.setattr(cache, "_default", None)
    yield root
