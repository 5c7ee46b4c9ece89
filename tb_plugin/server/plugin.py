"""The `torch_prof` TensorBoard plugin: route table and thin adapters over the run store.

Routes (GET, under `<path_prefix>/data/plugin/torch_prof/`) are documented in
`tb_plugin/openapi.yaml`. The plugin does not use TensorBoard's multiplexer (it is None under the
fast loader): it reads `--logdir` (or the first `--logdir_spec` entry) itself.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import threading
from typing import Any, Optional

from tensorboard.plugins import base_plugin
from werkzeug import wrappers

from ..settings import settings
from ..views.registry import SPECS
from ..views.tabs import view_specs
from ..views.trace.spec import warm_timeline
from . import static
from .api import Query, endpoint, json_response
from .capture_routes import CaptureRoutes
from .diff_default import diff_default
from .errors import NotFound
from .handlers import Handler, handler_of, trace_download
from .migration import startup_notices
from .provider import TraceProvider
from .store import RunStore

log = logging.getLogger(__name__)

PLUGIN_NAME = "torch_prof"
TAB_NAME = "PyTorch Profiler"
ROUTE_PREFIX = f"/data/plugin/{PLUGIN_NAME}/"
CATCH_ALL = "/*"  # not a route of the API: TensorBoard tries it after every other one


class TorchProfPlugin(base_plugin.TBPlugin):
    plugin_name = PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext,
                 provider: Optional[TraceProvider] = None,
                 allow_capture: Optional[bool] = None) -> None:
        """`provider`: the data behind the routes; by default a `RunStore` over the logdir,
        started at once when the logdir exists (or is a URL), so that the scan and the parse of
        the traces run while TensorBoard starts and the browser loads, else on first use.
        `allow_capture`: whether `POST /capture` may write requests; default
        $TORCH_PROF_ALLOW_CAPTURE. The settings (`TORCH_PROF_*`) are read once, here, and
        handed to the store."""
        self._logdir = resolve_logdir(context)
        self._config = settings()
        self._capture = CaptureRoutes(self._logdir, self._config.allow_capture
                                      if allow_capture is None else allow_capture)
        self._store: Optional[TraceProvider] = provider
        self._store_lock = threading.Lock()
        self._notices = startup_notices()  # the old torch-tb-profiler still installed
        if provider is None and _exists(self._logdir):
            log.debug("torch-prof timing: plugin_start (%s)", self._logdir)
            self._store = self._new_store()

    # -- TensorBoard hooks -------------------------------------------------------------------

    def get_plugin_apps(self) -> dict[str, Any]:
        apps = {
            "/index.js": endpoint(functools.partial(_static, name="index.js")),
            "/assets/*": endpoint(_asset),
            "/runs": endpoint(_json_only(self._runs)),
            "/views": endpoint(_json_only(self._views)),
            "/workers": endpoint(_json_only(self._workers)),
            "/spans": endpoint(_json_only(self._spans)),
            "/status": endpoint(_json_only(self._status)),
            "/viewspecs": endpoint(_json_only(self._viewspecs)),
            "/diff/default": endpoint(_json_only(self._diff_default)),
            "/trace/download": endpoint(_json_only(functools.partial(
                self._handle, handler=trace_download))),
            **self._capture.apps(_json_only),
        }
        for spec in SPECS.values():  # the data routes, one per view spec
            apps[spec.route] = endpoint(functools.partial(self._handle,
                                                          handler=handler_of(spec)))
        apps[CATCH_ALL] = endpoint(_unknown_route)  # JSON 404 instead of TensorBoard's text
        return apps

    def is_active(self) -> bool:
        # Called on every plugin listing: starts the background scan once, then only reads.
        return self.store.active()

    def frontend_metadata(self) -> base_plugin.FrontendMetadata:
        return base_plugin.FrontendMetadata(
            es_module_path="/index.js", tab_name=TAB_NAME, disable_reload=True)

    @property
    def store(self) -> TraceProvider:
        if self._store is None:
            with self._store_lock:
                if self._store is None:
                    self._store = self._new_store()
        return self._store

    def _new_store(self) -> RunStore:
        store = RunStore(self._logdir, config=self._config)
        store.add_warmer(warm_timeline)
        store.start()
        _close_at_exit(store)
        return store

    # -- adapters ------------------------------------------------------------------------------

    def _runs(self, request: wrappers.Request) -> wrappers.Response:
        return json_response(request, {**self.store.listing(), "notices": self._notices})

    def _views(self, request: wrappers.Request) -> wrappers.Response:
        return json_response(request, self.store.views(Query(request).text("run")))

    def _workers(self, request: wrappers.Request) -> wrappers.Response:
        query = Query(request)
        run, view = query.text("run"), query.text("view")
        return json_response(request, self.store.workers(run, view))

    def _spans(self, request: wrappers.Request) -> wrappers.Response:
        query = Query(request)
        run, worker = query.text("run"), query.text("worker")
        return json_response(request, self.store.spans(run, worker))

    def _viewspecs(self, request: wrappers.Request) -> wrappers.Response:
        return json_response(request, view_specs())

    def _diff_default(self, request: wrappers.Request) -> wrappers.Response:
        query = Query(request)
        run, worker, span = query.text("run"), query.text("worker"), query.text("span")
        return json_response(request, diff_default(self.store, run, worker, span))

    def _status(self, request: wrappers.Request) -> wrappers.Response:
        query = Query(request)
        run, worker, span = query.text("run"), query.text("worker"), query.text("span")
        return json_response(request, self.store.status(run, worker, span))

    def _handle(self, request: wrappers.Request, handler: Handler) -> wrappers.Response:
        return handler(self.store, request)


def _json_only(route: Any) -> Any:
    """A route with one form: `format` may be absent or `json`; anything else answers 400 (the
    data routes check it against their spec: `handlers.output_format`)."""

    @functools.wraps(route)
    def checked(request: wrappers.Request) -> wrappers.Response:
        Query(request).choice("format", ("json",), "json")
        return route(request)

    return checked


def _static(request: wrappers.Request, name: str) -> wrappers.Response:
    return static.serve(request, name)


def _unknown_route(request: wrappers.Request) -> wrappers.Response:
    _, _, route = request.path.partition(ROUTE_PREFIX)
    raise NotFound(f"no route {route[:120]!r} in the {PLUGIN_NAME} API")


def _asset(request: wrappers.Request) -> wrappers.Response:
    # request.path is below the path prefix; take what follows the plugin's own prefix.
    _, _, name = request.path.partition(ROUTE_PREFIX)
    if not name.startswith("assets/"):
        raise NotFound("no such asset")
    return static.serve(request, name)


def _exists(logdir: str) -> bool:
    return bool(logdir) and ("://" in logdir or os.path.isdir(logdir))


def resolve_logdir(context: base_plugin.TBContext) -> str:
    """`--logdir`, else the first `--logdir_spec` entry (other entries are ignored)."""
    logdir = getattr(context, "logdir", None) or getattr(context.flags, "logdir", None)
    if logdir:
        return os.path.expanduser(str(logdir))
    spec = getattr(context.flags, "logdir_spec", None) if context.flags else None
    if not spec:
        return ""
    paths = _spec_paths(spec)
    if len(paths) > 1:
        log.warning("torch-prof: --logdir_spec has %d entries; only %s is shown", len(paths),
                    paths[0])
    return os.path.expanduser(paths[0]) if paths else ""


def _spec_paths(spec: str) -> list[str]:
    try:  # TensorBoard's own parser (private): same rules for names, URLs and drive letters
        from tensorboard.backend.event_processing.data_ingester import _parse_event_files_spec

        return list(_parse_event_files_spec(spec))
    except Exception:
        paths = []
        for entry in spec.split(","):
            name, sep, path = entry.partition(":")
            is_named = sep and "://" not in entry and not entry.startswith("/") and len(name) > 1
            paths.append(path if is_named else entry)
        return [p for p in paths if p]


def _close_at_exit(store: RunStore) -> None:
    """Kill parser processes before concurrent.futures joins them at interpreter exit.

    `threading._register_atexit` hooks run in reverse order of registration, so ours (added
    after concurrent.futures.process registered its own) runs first; without it, stopping
    TensorBoard would wait for a running parse of a large file to finish.
    """
    register = getattr(threading, "_register_atexit", None)
    try:
        if register is not None:
            register(store.close)
            return
    except RuntimeError:  # already shutting down
        return
    atexit.register(store.close)
