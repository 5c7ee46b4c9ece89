"""The CLI as a new user meets it: help text, program name, errors in words, tab-name aliases,
the terminal table, and `samples/README.md`'s commands working as written."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tb_plugin import cli
from tb_plugin.reports import view_aliases, view_spec
from tests.support import SHARED_TRACES, needs_shared

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples"


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_help_has_paragraphs_and_examples_and_names_itself(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["/venv/bin/torch-prof", "--help"])
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = capsys.readouterr().out
    assert text.startswith("usage: torch-prof ")
    assert "\n\nexamples:\n  torch-prof summary ./logs\n" in text
    assert "python -m" not in text and "tb_plugin." not in text  # no internal module names
    monkeypatch.setattr(sys, "argv", [str(REPO / "tb_plugin" / "__main__.py"), "--help"])
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert capsys.readouterr().out.startswith("usage: python -m tb_plugin ")


def test_missing_logdir_exits_2_in_words(capsys: pytest.CaptureFixture[str],
                                         tmp_path: Path) -> None:
    code, out, err = run_cli(capsys, "summary", str(tmp_path / "does" / "not" / "exist"))
    assert code == 2 and out == ""
    assert err == f"error: {tmp_path / 'does' / 'not' / 'exist'} does not exist\n"
    code, _, err = run_cli(capsys, "report", str(tmp_path / "nope"), "--run", "r",
                           "--view", "overview")
    assert code == 2 and "does not exist" in err


@needs_shared
def test_export_only_run_says_what_is_wrong(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "report", str(SHARED_TRACES), "--run",
                             "memory_timeline_raw", "--view", "overview")
    assert code == 2 and out == ""
    assert err == ("error: run memory_timeline_raw has no trace files (only a memory-timeline "
                   "export: use --view memory_timeline)\n")


def test_worker_with_distributed_is_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "report", str(SAMPLES), "--run", "ddp_gloo", "--view",
                             "distributed", "--worker", "vm_9852_rank0")
    assert code == 2 and out == ""
    assert "--worker not taken by --view distributed" in err


@pytest.mark.parametrize(("tab", "view"), [("operator", "operators"), ("Kernel", "kernels"),
                                           ("trace", "timeline"), ("module", "modules")])
def test_tab_names_are_aliases(capsys: pytest.CaptureFixture[str], tab: str, view: str) -> None:
    assert view_aliases()[tab.lower()] == view
    args = ("report", str(SAMPLES), "--run", "cnn_bs32", "--format", "json")
    code, by_tab, err = run_cli(capsys, *args, "--view", tab)
    assert code == 0, err
    code, by_name, err = run_cli(capsys, *args, "--view", view)
    assert code == 0 and by_tab == by_name


@pytest.mark.parametrize("name", ["Overview", "OVERVIEW", "Inference", "GPU_IDLE"])
def test_view_names_are_read_in_any_case(name: str) -> None:
    """A tab whose name is also a view's (Overview, Inference) resolves to that view in any case,
    as the README says of tab names."""
    assert view_spec(name).name == name.lower()


def test_table_format_shows_the_csv_rows(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("report", str(SAMPLES), "--run", "cnn_bs32", "--view", "operators")
    code, text, err = run_cli(capsys, *args, "--format", "table")
    assert code == 0, err
    code, csv_text, _ = run_cli(capsys, *args, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(csv_text)))
    assert text.rstrip().endswith(f"{len(rows):,} rows")
    first = rows[0]
    calls = f"{int(float(first['calls'])):,}"
    line = next(ln for ln in text.splitlines() if ln.startswith("│ " + first["name"][:20]))
    assert re.search(rf"│\s+{re.escape(calls)} │", line), line
    assert "name" in text and "host_self_us" in text
    code, piped, _ = run_cli(capsys, *args)  # not a terminal: JSON, as before
    assert code == 0 and json.loads(piped)["rows"][0]["name"] == first["name"]


def test_samples_readme_commands_work(tmp_path: Path) -> None:
    readme = (SAMPLES / "README.md").read_text()
    commands = re.findall(r"`(torch-prof [^`]+)`", readme)
    assert len(commands) >= 2
    for command in commands:
        args = command.split()[1:]
        result = subprocess.run([sys.executable, "-m", "tb_plugin", "--cache-dir",
                                 str(tmp_path / "c"), *args], capture_output=True, text=True,
                                cwd=REPO, timeout=300)
        assert result.returncode == 0, (command, result.stderr)
        assert result.stdout.strip()
