"""`torch-prof export ... --format parquet` and `torch-prof sql`: the Parquet schema and query
results against numbers derived by hand from the synthetic ranks (tests/cluster/ranks.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tb_plugin.cli import main
from tests.cluster.ranks import write_run

RANKS = 4


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    pytest.importorskip("duckdb", reason='pip install "torch-prof[sql]"')
    write_run(tmp_path / "logs", RANKS)
    write_run(tmp_path / "logs", 2, name="other")
    return tmp_path / "logs"


def _sql(capsys, source: Path, statement: str) -> list[dict]:
    assert main(["sql", str(source), statement, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_export_writes_every_table_with_the_documented_schema(logdir: Path, tmp_path: Path,
                                                              capsys) -> None:
    out = tmp_path / "out"
    assert main(["export", str(logdir), "--run", "job", "--format", "parquet", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "device_args", "events", "flows", "memory", "op_args", "python_args", "traces"]
    assert all(len(list((out / name).glob("*.parquet"))) == RANKS for name in ("events", "traces"))
    columns = _sql(capsys, out, "SELECT column_name, column_type FROM "
                   "(DESCRIBE SELECT * FROM events)")
    assert [(c["column_name"], c["column_type"]) for c in columns] == [
        ("run", "VARCHAR"), ("worker", "VARCHAR"), ("span", "VARCHAR"), ("event", "BIGINT"),
        ("ts", "DOUBLE"), ("dur", "DOUBLE"), ("ph", "VARCHAR"), ("cat", "VARCHAR"),
        ("kind", "TINYINT"), ("name", "VARCHAR"), ("pid", "VARCHAR"), ("tid", "VARCHAR"),
        ("external_id", "DOUBLE"), ("correlation", "DOUBLE")]
    traces = _sql(capsys, out, "SELECT worker, rank, world_size, events, state FROM traces "
                  "ORDER BY rank")
    assert traces == [{"worker": f"host0_rank{r}", "rank": r, "world_size": RANKS,
                       "events": 48, "state": "ok"} for r in range(RANKS)]


def test_sql_over_a_logdir_matches_hand_derived_numbers(logdir: Path, capsys) -> None:
    rows = _sql(capsys, logdir, "SELECT run, worker, count(*) AS mm, round(sum(dur), 3) AS us "
                "FROM events WHERE name = 'aten::mm' GROUP BY ALL ORDER BY run, worker")
    expected = [{"run": "job", "worker": f"host0_rank{r}", "mm": 12,
                 "us": round(12 * round(40 * (1 + (r % 7) * 0.1) + r % 5, 3), 3)}
                for r in range(RANKS)]
    assert rows[:RANKS] == expected and [r["run"] for r in rows[RANKS:]] == ["other"] * 2
    joined = _sql(capsys, logdir, "SELECT count(*) AS n FROM op_args o JOIN events e "
                  "USING (run, worker, span, event) WHERE e.name = 'nccl:all_reduce' "
                  "AND o.collective = 'allreduce' AND o.group_size = 8")
    assert joined == [{"n": 3 * (RANKS + 2)}]  # 3 steps, one all_reduce each, on every rank
    nulls = _sql(capsys, logdir, "SELECT count(*) AS n FROM events WHERE run = 'job' AND "
                 "kind = 2 AND correlation IS NULL")  # the ProfilerSteps have no correlation
    assert nulls == [{"n": 3 * RANKS}]


def test_sql_errors_are_short(logdir: Path, capsys) -> None:
    assert main(["sql", str(logdir), "SELECT nope FROM events"]) == 2
    assert "nope" in capsys.readouterr().err
    assert main(["sql", str(logdir), "SELECT 1", "--run", "missing"]) == 2
    assert "unknown run(s) missing; known: job, other" in capsys.readouterr().err
