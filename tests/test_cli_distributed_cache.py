"""`report --view distributed` with every rank summary cached reads the summaries alone, never
the ranks' tables (issue 28: 1,024 cached ranks took 466 s re-reading every table); a
truncated file is used on both paths alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tb_plugin import cli
from tests.support.dist_ranks import Job, write_job


def _report(capsys: pytest.CaptureFixture[str], logdir: Path, cache: Path) -> dict:
    code = cli.main(["--cache-dir", str(cache), "report", str(logdir), "--run", "job", "--view",
                     "distributed", "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_cached_summaries_need_no_table(capsys: pytest.CaptureFixture[str],
                                        tmp_path: Path) -> None:
    logdir, cache = tmp_path / "logs", tmp_path / "cache"
    paths = write_job(Job(world=4, tp=2, late={(1, "tp"): 300.0}), logdir / "job")
    # rank 3's file ends mid-write: a truncated file, whose state must survive the cached path
    text = paths[3].read_text()
    paths[3].write_text(text[: text.rindex('{"ph"')])
    first = _report(capsys, logdir, cache)
    tables = list(cache.rglob("columns.npz"))
    assert len(tables) == 4
    for path in tables:  # only the summaries are left: the report must not need the tables
        path.unlink()
    again = _report(capsys, logdir, cache)
    assert again == first
    assert not list(cache.rglob("columns.npz"))  # nothing was parsed again
    assert first["workers"] == [f"rank000{r}" for r in range(4)]  # the truncated one used
    assert first["stragglers"]["rows"][0]["worker"] == "rank0001"
