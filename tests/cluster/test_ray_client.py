"""`--cluster ray://HOST:PORT` against a real Ray head started with `ray start --head` (its own
process group in a temporary directory, killed by that group's id at the end): the CLI's
summary runs through the Ray Client and gives the local numbers."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tb_plugin.cli import main
from tests.cluster.ranks import write_run
from tests.cluster.support import closed_port, import_ray, listening
from tests.support import REPO


@pytest.fixture(scope="module")
def head() -> Iterator[str]:
    ray = import_ray()
    assert not ray.is_initialized()  # test_ray.py's in-process instance is shut down by now
    gcs, client = closed_port(), closed_port()
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(REPO)}
    ray_cli = str(Path(sys.executable).with_name("ray"))
    start = subprocess.Popen(
        [ray_cli, "start", "--head", f"--port={gcs}", f"--ray-client-server-port={client}",
         "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats",
         f"--temp-dir={tempfile.mkdtemp(prefix='tp-head-')}"],
        env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        output = start.communicate(timeout=120)[0].decode(errors="replace")
        assert start.returncode == 0, output
        os.environ["RAY_AUTH_MODE"] = "disabled"  # this process is the client
        # `ray start` returns before its Ray Client proxy listens: wait for the port (bounded).
        assert listening("127.0.0.1", client, timeout=60), output
        yield f"ray://127.0.0.1:{client}"
    finally:
        os.environ.pop("RAY_AUTH_MODE", None)
        with contextlib.suppress(ProcessLookupError):  # the head's processes share its group
            os.killpg(start.pid, signal.SIGKILL)


def test_cli_summary_through_the_ray_client(head: str, tmp_path: Path, capsys) -> None:
    write_run(tmp_path / "logs", 8)
    status = main(["--cache-dir", f"file://{tmp_path / 'shared'}", "summary",
                   str(tmp_path / "logs"), "--json", "--cluster", head, "--progress"])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "8/8 files" in err.split("\r")[-1]
    assert main(["--no-cache", "summary", str(tmp_path / "logs"), "--json"]) == 0
    assert json.loads(out)["runs"] == json.loads(capsys.readouterr().out)["runs"]
    assert len(list((tmp_path / "shared").rglob("COMMIT.json"))) == 8
