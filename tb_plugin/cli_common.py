"""What the CLI's command modules share: the cache of the global `--cache-dir`/`--no-cache`
flags."""

from __future__ import annotations

import argparse

from .cache import TraceCache, cache_location, open_cache
from .settings import settings


def cache_of(args: argparse.Namespace) -> TraceCache:
    """The command's cache, carrying the process's settings (read here, once per command)."""
    config = settings()
    if args.no_cache:
        return TraceCache(None, config)
    if args.cache_dir:
        return TraceCache(cache_location(args.cache_dir), config)
    return open_cache(config)
