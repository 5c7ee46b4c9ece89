"""`torch-prof compare` and `torch-prof baseline` end to end: real CLI processes on runs
recorded with our recorder (torch on CPU): the gate's exit codes both ways, the markdown
report (headline, the injected operator first with its source line), the JUnit XML (parsed),
the baseline store on an fsspec URL, not-comparable sides, a broken file left out, usage
errors."""

from __future__ import annotations

import json
import shutil
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.support import import_torch
from tests.support.hostile import run_cli
from tests.test_recorder import PRELUDE, run_child

pytestmark = pytest.mark.e2e

#: The work whose repetition the experiment multiplies by 10: inside the module's forward, so
#: the model (its modules) stays the same; large against the host's noise (a loaded machine
#: stalls steps by tens of ms).
EXTRA_LINE = "            x = x + torch.mm(self.w, self.w)[0, 0] * 0  # EXTRA"
SCRIPT = textwrap.dedent("""
    class Net(nn.Module):
        def __init__(self, extra):
            super().__init__()
            self.a, self.b = nn.Linear(8, 16), nn.Linear(16, 2)
            self.extra = extra
            self.w = torch.randn(256, 256)

        def forward(self, x):
            x = torch.relu(self.a(x))
            for _ in range(self.extra):
    {extra}
            return self.b(x)

    class Other(nn.Module):
        def __init__(self):
            super().__init__()
            self.c = nn.Linear(8, 2)

        def forward(self, x):
            return self.c(x)

    for run, model in (("base", Net(4)), ("slow", Net(40)), ("other", Other())):
        with Recorder("logs", run=run, wait=1, warmup=1, active=10, repeat=1) as rec:
            train(rec, 12, model)
    report(ok=True)
    """).replace("{extra}", EXTRA_LINE)


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import_torch()
    cwd = tmp_path_factory.mktemp("compare")
    run_child(SCRIPT, cwd, timeout=300)
    return cwd / "logs"


def compare(*args: str) -> Any:
    """The per-run value is the median step (`--statistic median`): a loaded host stalls a few
    steps by tens of ms, which would widen the mean's interval past the injected change."""
    return run_cli("compare", "--statistic", "median", *args)


def test_gate_passes_on_identical_runs(logs: Path) -> None:
    done = compare(str(logs / "base"), str(logs / "base"), "--gate", "3%")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["verdict"] == "unchanged"
    assert result["gate"]["failed"] is False and result["gate"]["evaluated"] is True
    assert result["headline"]["delta_us"] == 0.0
    assert result["interval_over"] == "steps" and "steps only" in result["note"]
    assert (result["base"]["steps"], result["exp"]["steps"]) == (10, 10)


def test_gate_fails_on_a_regression_and_says_so(logs: Path) -> None:
    done = compare(str(logs / "base"), str(logs / "slow"), "--gate", "3%")
    assert done.returncode == 1
    assert "gate failed: step:Total regressed by more than 3% at 95% confidence" in done.stderr
    result = json.loads(done.stdout)
    assert result["verdict"] == "regressed" and result["gate"]["failed"] is True
    assert result["headline"]["low_us"] > 0.03 * result["headline"]["base_us"]
    assert result["top_regressed"][0]["name"] == "aten::mm"


def test_gate_on_a_named_metric(logs: Path) -> None:
    """The gate reads the named metric: the injected operator fails it; the same files on both
    sides (a zero change, whatever the host's noise) pass it."""
    failed = compare(str(logs / "base"), str(logs / "slow"), "--gate", "3%", "--metric",
                     "operator:aten::mm")
    assert failed.returncode == 1, failed.stderr
    assert "operator:aten::mm regressed by more than 3%" in failed.stderr
    done = compare(str(logs / "base"), str(logs / "base"), "--gate", "3%", "--metric",
                   "operator:aten::relu")
    assert done.returncode == 0, done.stderr
    missing = compare(str(logs / "base"), str(logs / "slow"), "--gate", "3%", "--metric",
                      "operator:nope")
    assert missing.returncode == 2
    assert "no metric 'operator:nope'" in missing.stderr and "step:Total" in missing.stderr


def test_markdown_names_the_verdict_and_the_injected_line(logs: Path) -> None:
    done = compare(str(logs / "base"), str(logs / "slow"), "--format", "markdown")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert text.splitlines()[2].startswith("**Verdict: 🔴 regressed**: step time ")
    # torch's Python tracer names each frame by its function's first line (co_firstlineno):
    # the Net.forward that holds the injected matmul
    lines = (PRELUDE + textwrap.dedent(SCRIPT)).splitlines()
    line = lines.index("    def forward(self, x):") + 1
    assert lines.index(EXTRA_LINE) - line == 2
    rows = [r for r in text.splitlines() if r.startswith("| 1 | ")]
    assert len(rows) == 1
    assert "`aten::mm`" in rows[0] and f"child.py({line}): forward" in rows[0]
    assert "http" not in text


def test_junit_is_valid_xml_with_the_gate_failure(logs: Path) -> None:
    failed = compare(str(logs / "base"), str(logs / "slow"), "--gate", "3%", "--format",
                     "junit")
    assert failed.returncode == 1
    suite = ET.fromstring(failed.stdout.split("?>", 1)[1])
    assert suite.tag == "testsuite" and suite.get("failures") == "1"
    gate = suite.find("testcase[@name='gate step:Total']")
    assert gate is not None and gate.find("failure").get("type") == "Regression"
    steps = [c.get("name") for c in suite.findall("testcase[@classname='torch-prof.compare.step']")]
    assert steps[0] == "Total" and int(suite.get("tests")) == 1 + len(steps)
    passed = ET.fromstring(compare(str(logs / "base"), str(logs / "base"), "--gate", "3%",
                                   "--format", "junit").stdout.split("?>", 1)[1])
    assert passed.get("failures") == "0" and passed.find(".//failure") is None


def test_not_comparable_with_a_gate_exits_3_with_the_reason(logs: Path) -> None:
    done = compare(str(logs / "base"), str(logs / "other"), "--gate", "3%", "--format",
                   "junit")
    assert done.returncode == 3
    assert "different model" in done.stderr
    suite = ET.fromstring(done.stdout.split("?>", 1)[1])
    assert suite.get("errors") == "1"
    assert "nn.Module: Other_0" in suite.find(".//error").text


def test_baseline_save_then_compare_on_an_fsspec_store(logs: Path, tmp_path: Path) -> None:
    store = (tmp_path / "store").as_uri()  # file:// URL, through fsspec
    saved = run_cli("baseline", "save", "main", str(logs / "base"), "--store", store)
    assert saved.returncode == 0, saved.stderr
    stored = json.loads((tmp_path / "store" / "main.json").read_text())
    assert stored["format"] == "torch-prof-baseline" and stored["version"] == 1
    assert [len(run) for run in stored["runs"]] == [1]
    assert "traceEvents" not in json.dumps(stored)
    listed = run_cli("baseline", "list", "--store", store)
    assert listed.stdout.split() == ["main"]
    same = compare("--baseline", "main", "--store", store, str(logs / "base"), "--gate", "3%")
    assert same.returncode == 0, same.stderr
    direct = json.loads(compare(str(logs / "base"), str(logs / "base")).stdout)
    assert json.loads(same.stdout)["metrics"] == direct["metrics"]
    slow = compare("--baseline", "main", "--store", store, str(logs / "slow"), "--gate", "3%")
    assert slow.returncode == 1
    unknown = compare("--baseline", "nope", "--store", store, str(logs / "slow"))
    assert unknown.returncode == 2 and "no baseline 'nope'" in unknown.stderr
    assert "main" in unknown.stderr


def test_a_broken_file_is_named_and_the_rest_compared(logs: Path, tmp_path: Path) -> None:
    run = tmp_path / "base_broken"
    shutil.copytree(logs / "base", run)
    (run / "broken_1.1.pt.trace.json").write_text('{"traceEvents": [')
    done = compare(str(logs / "base"), str(run))
    assert done.returncode == 0, done.stderr
    assert "broken_1.1.pt.trace.json left out" in done.stderr
    assert json.loads(done.stdout)["exp"]["files"] == 1


@pytest.mark.parametrize("args, message", [
    (["nowhere", "nowhere2"], "nowhere does not exist"),
    (["a"], "give BASE and EXP"),
    (["a", "b", "--gate", "3"], "give a percentage such as 3%"),
    (["a", "b", "--confidence", "1"], "expected 0.5 <= confidence < 1"),
])
def test_usage_errors_exit_2(logs: Path, args: list[str], message: str) -> None:
    done = compare(*args)
    assert done.returncode == 2 and message in done.stderr
