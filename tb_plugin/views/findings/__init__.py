"""The Findings view, all in this folder: its spec (`spec.py`), options (`options.py`) and
payload type (`payload.py`). The analysis: `tb_plugin/analysis/findings.py`. It has no tab: it
is the compact JSON for scripts, CI jobs and agents (`report --view findings`, the MCP server's
`findings` tool, `Trace.findings()`). No imports here: analysis modules import the payload
types alone."""
