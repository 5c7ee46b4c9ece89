"""GPU launch facts shared by every view: device properties, launch sizes, occupancy estimates.

One place, so the Kernel view, the GPU Summary, Memory and Distributed can never disagree.
"""

from __future__ import annotations

import math
import re
from typing import Any, Optional

import numpy as np
import pandas as pd

from ..ingest.schema import TraceTable
from .correlation import launches, lookup
from .events import category_flags

#: Resident blocks per SM by compute capability (CUDA occupancy tables); 32 when unknown.
_MAX_BLOCKS_PER_SM = {(3, 0): 16, (3, 5): 16, (3, 7): 16, (7, 5): 16, (8, 6): 16, (8, 7): 16,
                      (8, 9): 24, (12, 0): 24}
_DEFAULT_MAX_BLOCKS_PER_SM = 32


def device_properties(table: TraceTable, device: int) -> dict[str, Any]:
    """`deviceProperties` entry of a GPU: matched by its `id`, else by position in a list
    whose entries carry no ids (older Kineto); {} when unknown."""
    props = table.metadata.device_properties or []
    for entry in props:
        if isinstance(entry, dict) and entry.get("id") == device:
            return entry
    if 0 <= device < len(props) and isinstance(props[device], dict) and "id" not in props[device]:
        return props[device]
    return {}


def dims_product(column: pd.Series) -> np.ndarray:
    """"[4, 106, 1]" -> 424, parsed once per distinct string; NaN when absent or malformed."""
    codes, uniques = pd.factorize(column, use_na_sentinel=True)
    products = np.full(len(uniques) + 1, np.nan)  # the last slot serves code -1 (missing)
    for i, text in enumerate(uniques):
        numbers = [int(n) for n in re.findall(r"-?\d+", str(text))]
        if numbers and all(n > 0 for n in numbers):
            products[i] = float(math.prod(numbers))
    return products[codes]


def estimate_launch(props: dict[str, Any], blocks: np.ndarray, threads: np.ndarray,
                    regs: np.ndarray, shmem: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Kineto's formulas: blocks/SM = blocks / SMs; est. achieved occupancy % =
    min(threads / SMs / max threads per SM, theoretical occupancy) * 100, the theoretical one from
    the thread, register, shared-memory and block-count limits of one SM. NaN where the device
    properties or the launch configuration are unknown."""
    nan = np.full(np.shape(blocks), np.nan)
    sms = _positive(props.get("numSms"))
    max_threads = _positive(props.get("maxThreadsPerMultiprocessor"))
    if sms is None or max_threads is None:
        return nan, nan
    warp = _positive(props.get("warpSize")) or 32.0
    regs, shmem = np.nan_to_num(regs), np.nan_to_num(shmem)
    with np.errstate(divide="ignore", invalid="ignore"):
        blocks_per_sm = blocks / sms
        warps_per_block = np.ceil(threads / warp)
        limits = [np.floor(max_threads / (warps_per_block * warp))]
        regs_per_sm = _positive(props.get("regsPerMultiprocessor"))
        if regs_per_sm is not None:
            # Registers are allocated per warp (256 granularity) from 4 SM sub-partitions.
            regs_per_warp = np.ceil(regs * warp / 256.0) * 256.0
            warps_by_regs = np.floor(regs_per_sm / 4.0 / regs_per_warp) * 4.0
            limits.append(np.where(regs > 0, np.floor(warps_by_regs / warps_per_block), np.inf))
        smem_per_sm = _positive(props.get("sharedMemPerMultiprocessor"))
        if smem_per_sm is not None:
            limits.append(np.where(shmem > 0, np.floor(smem_per_sm / shmem), np.inf))
        capability = (props.get("computeMajor"), props.get("computeMinor"))
        limits.append(np.full(np.shape(blocks), float(
            _MAX_BLOCKS_PER_SM.get(capability, _DEFAULT_MAX_BLOCKS_PER_SM))))
        active_blocks = np.minimum.reduce(limits)
        theoretical = active_blocks * warps_per_block * warp / max_threads
        achieved = blocks * threads / sms / max_threads
        occupancy = np.minimum(achieved, theoretical) * 100.0
    valid = np.isfinite(blocks) & np.isfinite(threads) & (threads > 0)
    return np.where(valid, blocks_per_sm, np.nan), np.where(valid, occupancy, np.nan)


def fill_launch_estimates(table: TraceTable, frame: pd.DataFrame, grid: pd.Series,
                          block: pd.Series, regs: np.ndarray, shmem: np.ndarray) -> None:
    """Fill `frame`'s missing blocks_per_sm / occupancy (NaN) from the launch configuration,
    one vectorised pass per GPU; `frame` needs a `device` column, the others align with it."""
    missing = ~np.isfinite(frame["blocks_per_sm"].to_numpy(dtype=np.float64)) | ~np.isfinite(
        frame["occupancy"].to_numpy(dtype=np.float64))
    devices = frame["device"].to_numpy(dtype=np.float64)
    missing &= np.isfinite(devices)
    if not missing.any():
        return
    blocks, threads = dims_product(grid), dims_product(block)
    in_items = launched_in_work_items(table, frame["event"].to_numpy())
    with np.errstate(divide="ignore", invalid="ignore"):
        blocks = np.where(in_items, np.ceil(blocks / threads), blocks)
    for device in np.unique(devices[missing]):
        sel = missing & (devices == device)
        bpsm, occ = estimate_launch(device_properties(table, int(device)), blocks[sel],
                                    threads[sel], regs[sel], shmem[sel])
        for column, estimate in (("blocks_per_sm", bpsm), ("occupancy", occ)):
            current = frame.loc[sel, column].to_numpy(dtype=np.float64)
            frame.loc[sel, column] = np.where(np.isfinite(current), current, estimate)


#: Launch APIs whose `grid` is in work-items (threads), not in blocks: HIP's extended module
#: launch (rocBLAS/Tensile, hipBLASLt, CK) takes the global work size, as OpenCL does.
WORK_ITEM_LAUNCHES = frozenset(("hipExtModuleLaunchKernel", "hipHccModuleLaunchKernel"))


def launched_in_work_items(table: TraceTable, rows: np.ndarray) -> np.ndarray:
    """Per device event row: its launch (same correlation) gives the grid in work-items."""
    links = launches(table)
    if not len(rows) or not len(links.device_rows):
        return np.zeros(len(rows), dtype=bool)
    events = table.events
    flags = category_flags(events["name"], lambda n: n in WORK_ITEM_LAUNCHES,
                           links.launch_rows)
    launch = lookup(pd.Series(links.device_launch, index=links.device_rows), rows)
    return (launch >= 0) & flags[np.maximum(launch, 0)]


def _positive(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and value > 0 else None
