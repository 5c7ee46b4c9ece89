"""Development-only: dev_server.py plus the Trace view's routes (NOT shipped, NOT used by tests).

Serves `timeline`, `timeline/event`, `timeline/search` and `trace/download` straight from
tb_plugin.analysis.timeline, with the contract of the real plugin routes, so the Trace view can
be developed before/without TensorBoard:

    .venv/bin/python frontend/dev/trace_dev_server.py LOGDIR --port 6006

The browser tests (tests/ui/test_trace_view.py) always run the real TensorBoard.
"""

from __future__ import annotations

import argparse
import os
from http.server import ThreadingHTTPServer
from pathlib import Path

import dev_server  # noqa: E402  (same folder)
from dev_server import Handler, State

from tb_plugin.analysis.timeline import build_timeline, event_details, search_timeline


def _num(q: dict[str, str], key: str):
    value = q.get(key)
    return float(value) if value not in (None, "") else None


class TraceHandler(Handler):
    def route(self, route: str, q: dict[str, str]):
        if route == "views":
            return self.send(200, ["Overview", "Operator", "Kernel", "Trace"])
        if route == "runs":
            # the parent answers; patch the view list on the way out
            original = self.send

            def send(code, body, ctype="application/json"):
                if isinstance(body, dict) and "runs" in body:
                    for r in body["runs"]:
                        r["views"] = [*r["views"], "Trace"]
                return original(code, body, ctype)

            self.send = send  # type: ignore[method-assign]
            try:
                return super().route(route, q)
            finally:
                del self.send
        if route in ("timeline", "timeline/event", "timeline/search", "trace/download"):
            st = self.state
            if st.progress() < 1:
                return self.send(202, {"loading": True, "progress": st.progress()})
            if route == "trace/download":
                info = st.runs[q["run"]].span_file(q["worker"], q["span"])
                path = Path(str(info.ref.path if hasattr(info.ref, "path") else info.ref))
                data = path.read_bytes()
                self.send_response(200)
                ctype = "application/gzip" if path.name.endswith(".gz") else "application/json"
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Disposition", f'attachment; filename="{path.name}"')
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return None
            t = st.table(q["run"], q["worker"], q["span"])
            if route == "timeline":
                return self.send(200, build_timeline(t, _num(q, "start_us"), _num(q, "end_us"),
                                                     int(q.get("width") or 2000)))
            if route == "timeline/event":
                try:
                    return self.send(200, event_details(t, int(q["id"])))
                except KeyError as exc:
                    return self.error(404, str(exc))
            return self.send(200, search_timeline(t, q.get("q", ""), int(q.get("limit") or 200),
                                                  _num(q, "start_us")))
        return super().route(route, q)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("logdir")
    parser.add_argument("--port", type=int, default=6006)
    parser.add_argument("--loading-s", type=float, default=0.0, help="simulate loading")
    args = parser.parse_args()
    TraceHandler.state = State(args.logdir, args.loading_s)
    print(f"trace dev server on http://127.0.0.1:{args.port}/data/plugin_entry.html?name=torch_prof",
          flush=True)
    ThreadingHTTPServer(("127.0.0.1", args.port), TraceHandler).serve_forever()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    _ = dev_server
    main()
