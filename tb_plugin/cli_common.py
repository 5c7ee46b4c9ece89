"""What the CLI's command modules share: the cache of the global `--cache-dir`/`--no-cache`
flags."""

from __future__ import annotations

import argparse

from .cache import TraceCache, cache_location, default_cache


def cache_of(args: argparse.Namespace) -> TraceCache:
    if args.no_cache:
        return TraceCache(None)
    if args.cache_dir:
        return TraceCache(cache_location(args.cache_dir))
    return default_cache()
