"""The frontend bundle in `tb_plugin/static/` (`index.js`, `assets/*`).

A request names a file; it is served only if that exact relative name is in the listing of the
folder. No path is ever joined from the request, so `..`, absolute paths and encoded variants
cannot reach anything else.
"""

from __future__ import annotations

import gzip
import mimetypes
import os
import threading
from pathlib import Path

from tensorboard.backend import http_util
from werkzeug import wrappers

from .errors import NotFound

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"

CONTENT_TYPES = {
    ".js": "application/javascript",
    ".mjs": "application/javascript",
    ".css": "text/css",
    ".json": "application/json",
    ".map": "application/json",
    ".html": "text/html",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".woff": "font/woff",
    ".woff2": "font/woff2",
    ".wasm": "application/wasm",
    ".txt": "text/plain",
}
_TEXTUAL = ("application/javascript", "application/json", "text/", "image/svg+xml")

_lock = threading.Lock()
_gzip_memo: dict[str, tuple[tuple[int, int], bytes]] = {}


def listing(root: Path = STATIC_DIR) -> dict[str, Path]:
    """Relative POSIX name -> path of every regular file below root (symlinks not followed)."""
    files: dict[str, Path] = {}
    for folder, _dirs, names in os.walk(root):
        for name in names:
            path = Path(folder, name)
            if path.is_file() and not path.is_symlink():
                files[path.relative_to(root).as_posix()] = path
    return files


def content_type(name: str) -> str:
    suffix = os.path.splitext(name)[1].lower()
    return CONTENT_TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"


def serve(request: wrappers.Request, name: str, root: Path = STATIC_DIR) -> wrappers.Response:
    path = listing(root).get(name)
    if path is None:
        raise NotFound(f"no static file {name[:120]!r}")
    kind = content_type(name)
    if not kind.startswith(_TEXTUAL):
        return http_util.Respond(request, path.read_bytes(), kind)
    return http_util.Respond(request, _gzipped(path), kind, content_encoding="gzip")


def _gzipped(path: Path) -> bytes:
    """Text files gzipped once per version (the bundle is large; Respond would redo it)."""
    stat = path.stat()
    version = (stat.st_mtime_ns, stat.st_size)
    key = str(path)
    with _lock:
        memo = _gzip_memo.get(key)
    if memo is not None and memo[0] == version:
        return memo[1]
    body = gzip.compress(path.read_bytes(), compresslevel=6, mtime=0)
    with _lock:
        _gzip_memo[key] = (version, body)
    return body
