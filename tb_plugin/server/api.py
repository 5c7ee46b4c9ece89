"""Request parsing/validation and responses. Every response goes through `http_util.Respond`
(nosniff on all, a strict CSP on HTML), errors included, and no exception escapes as a traceback.
"""

from __future__ import annotations

import gzip
import logging
from typing import Any, Callable, Optional

from tensorboard.backend import http_util
from werkzeug import wrappers

from ..output.encoding import encode_json
from ..views.errors import NotInTrace, OptionError, Unreadable
from .errors import (
    ApiError,
    BadRequest,
    MethodNotAllowed,
    NotFound,
    StillLoading,
    Unprocessable,
)

log = logging.getLogger(__name__)

JSON = "application/json"
CSV = "text/csv; charset=utf-8"
MAX_PARAM_LENGTH = 4096

Handler = Callable[[wrappers.Request], wrappers.Response]


def gzipped(body: bytes) -> bytes:
    return gzip.compress(body, compresslevel=6, mtime=0)


def json_response(request: wrappers.Request, payload: Any, code: int = 200
                  ) -> wrappers.Response:
    return http_util.Respond(request, encode_json(payload), JSON, code=code)


def gzip_response(request: wrappers.Request, body: bytes, content_type: str,
                  headers: Optional[list[tuple[str, str]]] = None) -> wrappers.Response:
    """A pre-gzipped body (Respond gunzips it for clients that do not accept gzip)."""
    return http_util.Respond(request, body, content_type, content_encoding="gzip",
                             headers=headers)


def error_response(request: wrappers.Request, error: ApiError) -> wrappers.Response:
    headers = [("Retry-After", "1")] if isinstance(error, StillLoading) else None
    return http_util.Respond(request, encode_json(error.body()), JSON, code=error.code,
                             headers=headers)


def endpoint(handler: Handler, methods: tuple[str, ...] = ("GET", "HEAD")
             ) -> Callable[..., Any]:
    """Wrap a handler into a WSGI app: `methods` only (GET/HEAD by default), errors as JSON,
    bugs as a short 500."""

    @wrappers.Request.application
    def app(request: wrappers.Request) -> wrappers.Response:
        try:
            if request.method not in methods:
                raise MethodNotAllowed(f"method {request.method} is not allowed; use "
                                       f"{methods[0]}")
            return handler(request)
        except ApiError as exc:
            return error_response(request, exc)
        except OptionError as exc:  # a view's options (views.options, a spec's builder)
            return error_response(request, BadRequest(str(exc)))
        except NotInTrace as exc:
            return error_response(request, NotFound(str(exc)))
        except Unreadable as exc:  # a refused or unreadable file: the user's to fix, logged
            log.warning("torch-prof: %s: %s", request.path, exc)
            return error_response(request, Unprocessable(str(exc), [str(exc)]))
        except Exception as exc:  # a real bug: log the traceback, answer briefly
            log.exception("torch-prof: %s failed", request.path)
            error = ApiError(f"internal error ({type(exc).__name__}); see the TensorBoard log")
            return error_response(request, error)

    return app


class Query:
    """Typed access to query parameters; anything malformed is a 400 naming the parameter."""

    def __init__(self, request: wrappers.Request) -> None:
        self._args = request.args

    def text(self, name: str, *, required: bool = True) -> Optional[str]:
        values = self._args.getlist(name)
        if len(values) > 1:
            raise BadRequest(f"parameter {name!r} is given {len(values)} times")
        value = values[0] if values else None
        if value is None or value == "":
            if required:
                raise BadRequest(f"missing parameter {name!r}")
            return None
        if len(value) > MAX_PARAM_LENGTH or "\x00" in value:
            raise BadRequest(f"parameter {name!r} is too long or contains NUL")
        return value

    def choice(self, name: str, choices: tuple[str, ...], default: Optional[str]) -> str:
        value = self.text(name, required=default is None)
        if value is None:
            return default  # type: ignore[return-value]
        if value not in choices:
            raise BadRequest(f"parameter {name!r} must be one of {', '.join(choices)}; "
                             f"got {value[:60]!r}")
        return value
