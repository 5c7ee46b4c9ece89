"""`analysis/launch.py` at its rules, every expected value worked by hand from the CUDA
occupancy formulas: the warp size (32 unless the properties give a positive one), each SM limit
(threads, registers per warp at 256 granularity from 4 sub-partitions, shared memory, resident
blocks by compute capability) binding in turn and lifted when its input is 0, NaN for unknown
properties or launches, the launch-dims product, and the device-properties lookup."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tb_plugin.analysis.launch import device_properties, dims_product, estimate_launch

from .helpers import make_table

BASE = {"numSms": 10, "maxThreadsPerMultiprocessor": 2048}


def _occupancy(props: dict, threads: float, regs: float = 0.0, shmem: float = 0.0,
               blocks: float = 1000.0) -> float:
    bpsm, occ = estimate_launch(props, np.array([blocks]), np.array([threads]),
                                np.array([regs]), np.array([shmem]))
    assert bpsm[0] == blocks / props["numSms"]
    return float(occ[0])


def test_warp_size_default_and_given() -> None:
    # capability 7.5: 16 blocks per SM. 96 threads, warp 32: 3 warps a block; threads allow
    # floor(2048 / 96) = 21 blocks, so 16 bind: 16 x 3 x 32 / 2048 = 75 %
    turing = {**BASE, "computeMajor": 7, "computeMinor": 5}
    assert _occupancy(turing, 96) == 75.0
    assert _occupancy({**turing, "warpSize": 0}, 96) == 75.0  # not positive: 32
    assert _occupancy({**turing, "warpSize": "64"}, 96) == 75.0  # not a number: 32
    # warp 64: 2 warps a block, threads allow floor(2048 / 128) = 16: 16 x 2 x 64 / 2048
    assert _occupancy({**turing, "warpSize": 64}, 96) == 100.0


def test_each_limit_binds() -> None:
    # 128 threads = 4 warps. Threads: floor(2048 / 128) = 16 blocks; unknown capability: 32.
    assert _occupancy(BASE, 128) == 100.0  # 16 x 4 x 32 / 2048
    # 64 registers: ceil(64 x 32 / 256) x 256 = 2048 a warp; floor(65536 / 4 / 2048) x 4 = 32
    # warps, 8 blocks: 8 x 4 x 32 / 2048 = 50 %; 0 registers: no limit
    regs = {**BASE, "regsPerMultiprocessor": 65536}
    assert _occupancy(regs, 128, regs=64) == 50.0
    assert _occupancy(regs, 128, regs=0) == 100.0
    # 65 registers: ceil(65 x 32 / 256) = 9 -> 2304 a warp; floor(16384 / 2304) x 4 = 28 warps:
    # 7 blocks, 43.75 %
    assert _occupancy(regs, 128, regs=65) == 43.75
    # one register already takes a 256-register allocation a warp: with 4096 registers an SM,
    # floor(1024 / 256) x 4 = 16 warps, 4 blocks of 4 warps: 25 %
    assert _occupancy({**BASE, "regsPerMultiprocessor": 4096}, 128, regs=1) == 25.0
    # 801 registers x 32 = 25632 -> 101 allocations of 256 = 25856 a warp (not 100 x 256):
    # 102800 / 4 = 25700 a sub-partition holds no such warp: 0 %
    assert _occupancy({**BASE, "regsPerMultiprocessor": 102800}, 32, regs=801) == 0.0
    # shared memory: floor(100000 / 30000) = 3 blocks: 3 x 4 x 32 / 2048 = 18.75 %
    smem = {**BASE, "sharedMemPerMultiprocessor": 100000}
    assert _occupancy(smem, 128, shmem=30000) == 18.75
    assert _occupancy(smem, 128, shmem=0) == 100.0
    # 1 byte of 3 an SM: 3 blocks again
    assert _occupancy({**BASE, "sharedMemPerMultiprocessor": 3}, 128, shmem=1) == 18.75
    # 32 threads = 1 warp: threads allow 64 blocks; capability 8.9: 24 blocks -> 37.5 %,
    # unknown: 32 -> 50 %, 8.0 (not listed): 32
    assert _occupancy({**BASE, "computeMajor": 8, "computeMinor": 9}, 32) == 37.5
    assert _occupancy(BASE, 32) == 50.0
    assert _occupancy({**BASE, "computeMajor": 8, "computeMinor": 0}, 32) == 50.0


def test_achieved_below_theoretical() -> None:
    # 20 blocks x 48 threads / 10 SMs / 2048 = 4.6875 % (theoretical: 100 %)
    assert _occupancy(BASE, 48, blocks=20) == pytest.approx(4.6875)


def test_one_thread_a_block_is_a_launch() -> None:
    # 1000 blocks of 1 thread on 10 SMs: 100 threads an SM of 2048 = 4.8828125 %
    assert _occupancy(BASE, 1) == 100 * 1000 / 10 / 2048


def test_unknown_properties_or_launch_give_nan() -> None:
    blocks, threads = np.array([20.0, np.nan, 20.0]), np.array([48.0, 48.0, 0.0])
    zeros = np.zeros(3)
    bpsm, occ = estimate_launch(BASE, blocks, threads, zeros, zeros)
    assert bpsm[0] == 2.0 and np.isnan(bpsm[1:]).all() and np.isnan(occ[1:]).all()
    for props in ({}, {"numSms": 10}, {"maxThreadsPerMultiprocessor": 2048},
                  {**BASE, "numSms": 0}, {**BASE, "maxThreadsPerMultiprocessor": -1}):
        bpsm, occ = estimate_launch(props, blocks, threads, zeros, zeros)
        assert bpsm.shape == occ.shape == (3,)
        assert np.isnan(bpsm).all() and np.isnan(occ).all()


def test_dims_product() -> None:
    got = dims_product(pd.Series(["[4, 106, 1]", "[0, 1, 1]", "[-2, 3]", "", None, "[7]",
                                  "[4, 106, 1]"]))
    assert got[0] == 424.0 and got[5] == 7.0 and got[6] == 424.0
    assert np.isnan(got[1:5]).all()


def test_device_properties_by_id_else_position(tmp_path) -> None:
    with_ids = make_table([], tmp_path, deviceProperties=[{"id": 1, "name": "B"},
                                                          {"id": 0, "name": "A"}])
    assert device_properties(with_ids, 0)["name"] == "A"
    assert device_properties(with_ids, 1)["name"] == "B"
    assert device_properties(with_ids, 2) == {}
    no_ids = make_table([], tmp_path, deviceProperties=[{"name": "A"}, {"name": "B"}])
    assert device_properties(no_ids, 1) == {"name": "B"}
    assert device_properties(no_ids, 0) == {"name": "A"}
    # entries with ids are never taken by position
    other_ids = make_table([], tmp_path, deviceProperties=[{"id": 5, "name": "X"}])
    assert device_properties(other_ids, 0) == {} and device_properties(other_ids, 5)["name"] == "X"
    assert device_properties(no_ids, 2) == {} and device_properties(no_ids, -1) == {}
    assert device_properties(make_table([], tmp_path), 0) == {}
