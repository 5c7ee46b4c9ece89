"""Capture on demand from the UI: `/capture/targets` (GET), `/capture` (POST), `/capture/status`
(GET). The POST writes the same request file as `torch-prof capture` (`capture/protocol.py`)
into a run folder where a job listens.

TensorBoard has no authentication, so writing requests is off unless TensorBoard was started
with `TORCH_PROF_ALLOW_CAPTURE=1` (`settings.Settings.allow_capture`, passed in when the plugin
is built): without it the POST answers 403 and `/capture/targets` says so. The POST takes a
JSON body only (`Content-Type: application/json`, which a cross-site form cannot send without a
CORS preflight that TensorBoard does not answer). Run names are looked up among the folders
where a job listens (`protocol.capture_targets`); no path is built from a request.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable

import msgspec
from werkzeug import wrappers

from ..capture import protocol
from ..payloads import CaptureForm
from ..settings import ALLOW_CAPTURE_ENV
from .api import Query, endpoint, json_response
from .errors import BadRequest, Forbidden, NotFound

#: Largest POST body read (a request form is ~150 bytes).
MAX_BODY = 4096
#: Requests made here whose status `/capture/status` can answer (the most recent ones).
REMEMBERED = 256


class CaptureRoutes:
    """The three routes over one logdir; `allowed` is `settings().allow_capture`."""

    def __init__(self, logdir: str, allowed: bool) -> None:
        self.logdir = logdir
        self.allowed = allowed
        self._made: OrderedDict[str, tuple[str, int]] = OrderedDict()  # id -> (folder, expected)
        self._lock = threading.Lock()

    def apps(self, wrap: Callable[[Any], Any]) -> dict[str, Any]:
        """The WSGI apps by route; `wrap` adds the plugin's `format` check to the GETs."""
        return {
            "/capture/targets": endpoint(wrap(self.targets)),
            "/capture": endpoint(self.request_capture, methods=("POST",)),
            "/capture/status": endpoint(wrap(self.status)),
        }

    def targets(self, request: wrappers.Request) -> wrappers.Response:
        found = protocol.capture_targets(self.logdir) if self.logdir else {}
        runs = [{"run": run, "workers": sorted(lst.worker for lst in protocol.listeners(folder))}
                for run, folder in found.items()]
        if not self.allowed:
            message = (f"Capture is disabled: start TensorBoard with {ALLOW_CAPTURE_ENV}=1 to "
                       "allow it (anyone who can reach TensorBoard could then ask for one).")
        elif not runs:
            message = ("No job listens in this logdir: record with Recorder(..., "
                       "on_demand=True) or tb_plugin.recorder.listen(logdir, run=...).")
        else:
            message = ""
        return json_response(request, {"enabled": self.allowed, "message": message,
                                       "runs": runs})

    def request_capture(self, request: wrappers.Request) -> wrappers.Response:
        if not self.allowed:
            raise Forbidden(f"capture is disabled; start TensorBoard with {ALLOW_CAPTURE_ENV}=1 "
                            "to allow it")
        if request.mimetype != "application/json":
            raise BadRequest("the body must be JSON (Content-Type: application/json)")
        if request.content_length is None or request.content_length > MAX_BODY:
            raise BadRequest(f"the body must be JSON of at most {MAX_BODY} bytes")
        try:
            form = msgspec.json.decode(request.get_data(cache=False), type=CaptureForm)
        except msgspec.DecodeError as exc:
            raise BadRequest(f"invalid capture request: {exc}") from None
        folder = protocol.capture_targets(self.logdir).get(form.run) if self.logdir else None
        if folder is None:
            raise NotFound(f"no job listens in run {form.run[:120]!r}")
        expected = len(protocol.listeners(folder))
        made = protocol.new_request(
            form.steps, memory_snapshot=form.memory_snapshot, with_stack=form.with_stack,
            record_shapes=form.record_shapes, profile_memory=form.profile_memory)
        protocol.write_request(folder, made)
        with self._lock:
            self._made[made.id] = (folder, expected)
            while len(self._made) > REMEMBERED:
                self._made.popitem(last=False)
        return json_response(request, {"id": made.id, "run": form.run, "expected": expected})

    def status(self, request: wrappers.Request) -> wrappers.Response:
        request_id = Query(request).text("id")
        with self._lock:
            made = self._made.get(request_id or "")
        if made is None:
            raise NotFound(f"no capture request {str(request_id)[:60]!r} made by this server")
        folder, expected = made
        found = protocol.statuses(folder, request_id or "")
        return json_response(request, protocol.summary(request_id or "", found, expected))
