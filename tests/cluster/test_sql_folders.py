"""Issue 32: `torch-prof export` into a folder that holds anything is refused unless `--replace`,
which replaces the earlier export of the same runs only; `sql` reads the folder it is given
literally (`x[1]` is not the glob that matches `x1`); export errors are one line, not a
traceback. Runs from tests/cluster/ranks.py: `job` (4 ranks) and `other` (2), 48 events per
rank file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tb_plugin.cli import main
from tests.cluster.ranks import write_run

EVENTS_PER_RANK = 48
JOB, OTHER = 4, 2


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    pytest.importorskip("duckdb", reason='pip install "torch-prof[sql]"')
    write_run(tmp_path / "logs", JOB)
    write_run(tmp_path / "logs", OTHER, name="other")
    return tmp_path / "logs"


def _export(logdir: Path, out: Path, *runs: str, replace: bool = False) -> int:
    flags = [arg for run in runs for arg in ("--run", run)]
    return main(["export", str(logdir), *flags, str(out), *(["--replace"] if replace else [])])


def _per_run(capsys: pytest.CaptureFixture[str], folder: Path) -> dict[str, list[int]]:
    """run -> [worker spans, events] of the export's `traces` table."""
    assert main(["sql", str(folder), "SELECT run, count(*) AS files, sum(events) AS events "
                 "FROM traces GROUP BY run ORDER BY run", "--format", "json"]) == 0
    return {r["run"]: [r["files"], r["events"]] for r in json.loads(capsys.readouterr().out)}


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_export_refuses_a_folder_that_holds_anything(logdir: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    out.mkdir()
    assert _export(logdir, out, "job") == 0  # an empty folder is fine (boundary: 0 entries)
    capsys.readouterr()
    before = _tree(out)
    assert _export(logdir, out, "job") == 2  # 1 or more entries: refused
    err = capsys.readouterr().err
    assert err == (f"error: {out} is not empty (7 entries, e.g. 'device_args'): give a new or "
                   "empty folder, or --replace to replace the export of job in it\n")
    assert _tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs", "out"]  # no staging left
    stray = tmp_path / "notes"
    stray.mkdir()
    (stray / "todo.txt").write_text("keep me")
    assert _export(logdir, stray, "job") == 2
    assert "notes is not empty (1 entries, e.g. 'todo.txt')" in capsys.readouterr().err
    assert _tree(stray) == ["todo.txt"]


def test_replace_swaps_only_the_runs_exported(logdir: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "new" / "out"  # created, parents too
    assert _export(logdir, out, "job") == 0
    assert _export(logdir, out, "other", replace=True) == 0  # adds a run to the export
    assert _per_run(capsys, out) == {"job": [JOB, JOB * EVENTS_PER_RANK],
                                     "other": [OTHER, OTHER * EVENTS_PER_RANK]}
    assert _export(logdir, out, "job", replace=True) == 0  # the earlier job files go
    assert _per_run(capsys, out) == {"job": [JOB, JOB * EVENTS_PER_RANK],
                                     "other": [OTHER, OTHER * EVENTS_PER_RANK]}
    files = sorted(p.name for p in (out / "events").iterdir())
    assert len(files) == JOB + OTHER == len(set(files))
    for table in ("events", "traces", "flows"):  # every table folder numbered alike
        assert sorted(p.name for p in (out / table).iterdir()) == files
    assert main(["sql", str(out), "SELECT count(*) AS n FROM events", "--format",
                 "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"n": (JOB + OTHER) * EVENTS_PER_RANK}]


def test_replace_never_touches_a_folder_that_is_not_an_export(
        logdir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert _export(logdir, out, "job") == 0
    capsys.readouterr()
    (out / "events" / "mine.csv").write_text("x")  # a file no export writes
    before = _tree(out)
    assert _export(logdir, out, "job", replace=True) == 2
    assert capsys.readouterr().err == (
        f"error: --replace only replaces runs in an earlier export, and {out} is not one (it "
        "holds 'events'); nothing was changed\n")
    assert _tree(out) == before
    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("x")
    assert _export(logdir, home, "job", replace=True) == 2
    assert "(it holds 'thesis.tex'); nothing was changed" in capsys.readouterr().err
    assert _tree(home) == ["thesis.tex"]
    a_file = tmp_path / "file.parquet"
    a_file.write_text("x")
    assert _export(logdir, a_file, "job", replace=True) == 2
    assert capsys.readouterr().err == f"error: {a_file} is not a folder\n"


def test_export_write_errors_are_one_line(logdir: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    assert _export(logdir, blocker / "out", "job") == 1  # its parent is a file
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot write beside {blocker / 'out'}: ") and \
        err.count("\n") == 1, err
    assert _export(logdir, tmp_path / "out", "missing") == 2
    assert capsys.readouterr().err == "error: unknown run(s) missing; known: job, other\n"
    assert main(["sql", str(tmp_path / "nowhere"), "SELECT 1"]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'nowhere'} does not exist\n"


@pytest.mark.parametrize("name, sibling", [("x[1]", "x1"), ("a*", "ab"), ("q?", "qz"),
                                           ("it's [", "it's ["[:-1] + "x")])
def test_sql_reads_the_folder_given_literally(logdir: Path, tmp_path: Path, name: str,
                                              sibling: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Before: `x[1]` read `x1` only, `a*` and `q?` read their sibling too."""
    assert _export(logdir, tmp_path / name, "job") == 0
    assert _export(logdir, tmp_path / sibling, "other") == 0
    assert os.path.isdir(tmp_path / name) and os.path.isdir(tmp_path / sibling)
    assert _per_run(capsys, tmp_path / name) == {"job": [JOB, JOB * EVENTS_PER_RANK]}
    assert _per_run(capsys, tmp_path / sibling) == {"other": [OTHER, OTHER * EVENTS_PER_RANK]}
