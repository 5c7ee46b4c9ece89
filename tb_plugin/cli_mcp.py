"""`torch-prof mcp LOGDIR`: serve the logdir's views to AI agents over MCP (stdio). The server
is `mcp_server.py`, imported only here and only when the `mcp` SDK is installed (the optional
extra `torch-prof[mcp]`): without it the command says how to install it (exit 1)."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from typing import Any

from .cli_common import cache_of
from .reports import missing_logdir


def add_parser(commands: Any) -> None:
    mcp = commands.add_parser(
        "mcp", help="serve a logdir's views to AI agents (MCP over stdio)",
        description="An MCP server on stdin/stdout: one tool per view of `report` (findings "
        "among them), plus list_runs and sql; the answers are the HTTP API's payloads. Give "
        "the command to an MCP client, e.g. `torch-prof mcp /path/to/logs`.")
    mcp.add_argument("logdir", help="local folder or fsspec URL (s3://, gs://, ...)")


def run(args: argparse.Namespace) -> int:
    missing = missing_logdir(args.logdir)
    if missing:
        sys.stderr.write(f"error: {missing}\n")
        return 2
    if importlib.util.find_spec("mcp") is None:
        sys.stderr.write('error: the MCP server needs the mcp package: pip install '
                         '"torch-prof[mcp]"\n')
        return 1
    server = importlib.import_module("tb_plugin.mcp_server")
    return int(server.serve(args.logdir, cache_of(args)))
