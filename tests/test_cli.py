"""The CLI as a user runs it (a subprocess): summary of a logdir, usage errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tb_plugin.ingest import LoadState
from tests.ingest.hostile_pickles import malformed_snapshots, memo_bomb
from tests.ingest.logdirs import write_logdir
from tests.ingest.snapshots import evil_pickles, hand_snapshot
from tests.ingest.snapshots import write as write_snapshot
from tests.support import SHARED_TRACES, needs_shared

REPO = Path(__file__).resolve().parents[1]


def _cli(*args: str, cache_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tb_plugin", "--cache-dir", str(cache_dir),
                           *args], capture_output=True, text=True, cwd=REPO, timeout=300)


def test_cli_summary_reports_broken_workers_and_exits_zero(tmp_path: Path) -> None:
    write_logdir(tmp_path / "logs")
    (tmp_path / "logs" / "run_a" / "broken.1.pt.trace.json").write_text('{"traceEvents": [{"p')
    result = _cli("summary", str(tmp_path / "logs"), "--json", cache_dir=tmp_path / "c")
    assert result.returncode == 0, result.stderr
    runs = {r["name"]: r for r in json.loads(result.stdout)["runs"]}
    workers = {w["name"]: w for w in runs["run_a"]["workers"]}
    assert workers["broken"]["spans"][0]["state"] == LoadState.TRUNCATED
    assert workers["host_1"]["spans"][0]["state"] == LoadState.OK
    assert workers["host_1"]["spans"][0]["events"] == 1
    text = _cli("summary", str(tmp_path / "logs"), cache_dir=tmp_path / "c")
    assert "broken" in text.stdout and "cut off" in text.stdout


def test_cli_report_usage_errors(tmp_path: Path) -> None:
    write_logdir(tmp_path / "logs")
    result = _cli("report", str(tmp_path / "logs"), "--run", "nope", "--view", "overview",
                  cache_dir=tmp_path / "c")
    assert result.returncode == 2 and "no run 'nope'" in result.stderr


@needs_shared
def test_cli_summary_on_shared_traces(tmp_path: Path) -> None:
    result = _cli("summary", str(SHARED_TRACES), "--json", cache_dir=tmp_path / "c")
    assert result.returncode == 0, result.stderr
    runs = {r["name"]: r for r in json.loads(result.stdout)["runs"]}
    expected = {p.name for p in SHARED_TRACES.iterdir() if p.is_dir()}
    expected |= {f"{p.name}/capture" for p in SHARED_TRACES.iterdir() if (p / "capture").is_dir()}
    assert set(runs) == expected
    for run in runs.values():
        for worker in run["workers"]:
            for span in worker["spans"]:
                assert span["state"] == LoadState.OK and span["events"] > 0
    assert runs["memory_timeline_raw"]["memory_timelines"]


def test_cli_reports_a_snapshot_and_refuses_a_malicious_one(tmp_path: Path) -> None:
    run = tmp_path / "logs" / "oom"
    run.mkdir(parents=True)
    write_snapshot(run / "dump_snapshot.pickle", hand_snapshot())
    (run / "evil.pickle").write_bytes(evil_pickles(tmp_path / "pwned")["os.system"])
    result = _cli("report", str(tmp_path / "logs"), "--run", "oom", "--view", "memory_snapshot",
                  "--snapshot", "dump_snapshot.pickle", cache_dir=tmp_path / "c")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["peak"]["bytes"] == (9 << 20) + (512 << 10) and payload["clock"] == "snapshot"
    refused = _cli("report", str(tmp_path / "logs"), "--run", "oom", "--view",
                   "memory_snapshot", "--snapshot", "evil.pickle", cache_dir=tmp_path / "c")
    assert refused.returncode == 1 and "evil.pickle: refused" in refused.stderr
    assert not (tmp_path / "pwned").exists()
    summary = _cli("summary", str(tmp_path / "logs"), cache_dir=tmp_path / "c")
    assert "allocator snapshot:" in summary.stdout


def test_cli_reports_a_hostile_snapshot_as_its_error(tmp_path: Path) -> None:
    run = tmp_path / "logs" / "oom"
    run.mkdir(parents=True)
    (run / "bomb.pickle").write_bytes(memo_bomb())
    data, skipped = malformed_snapshots()["size-a-string"]
    write_snapshot(run / "odd_snapshot.pickle", data)
    bomb = _cli("report", str(tmp_path / "logs"), "--run", "oom", "--view", "memory_snapshot",
                "--snapshot", "bomb.pickle", cache_dir=tmp_path / "c")
    assert bomb.returncode == 1 and "Traceback" not in bomb.stderr
    assert "bomb.pickle: not a readable pickle: memo index 268435456 is beyond" in bomb.stderr
    odd = _cli("report", str(tmp_path / "logs"), "--run", "oom", "--view", "memory_snapshot",
               "--snapshot", "odd_snapshot.pickle", cache_dir=tmp_path / "c")
    assert odd.returncode == 0, odd.stderr
    assert f"Skipped {skipped} malformed snapshot record" in json.loads(odd.stdout)["messages"][0]
