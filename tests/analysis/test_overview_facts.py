"""The facts the Overview's advice is built from, read off hand-built traces: which wrapper and
backend a run uses (DDP only from `DistributedDataParallel.forward`, NCCL from the backend or
NCCL events) and which GPUs ran work (`device` arg, else the device event's pid)."""

from tb_plugin.analysis.overview import build_overview, used_devices

from .helpers import cpu_op, kernel, make_table, runtime, step

GLOO = {"backend": "gloo", "rank": 0, "world_size": 2}
NCCL = {"backend": "nccl", "rank": 0, "world_size": 2}


def _events(*host_names: str) -> list[dict]:
    ops = [cpu_op(name, 20 + 100 * i, 50, ext=i + 1) for i, name in enumerate(host_names)]
    launches = [runtime(30 + 100 * i, 5, corr=i + 1, ext=i + 1) for i in range(len(host_names))]
    kernels = [kernel(40 + 100 * i, 20, corr=i + 1, ext=i + 1) for i in range(len(host_names))]
    return [step(1, 10, 100 * len(host_names) + 20), *ops, *launches, *kernels]


def _advice_ids(tmp_path, events, info) -> list[str]:
    table = make_table(events, tmp_path, distributedInfo=info)
    return [item["id"] for item in build_overview(table)["recommendations"]]


def test_ddp_is_only_the_ddp_forward(tmp_path):
    # gloo on a GPU: the nccl advice is for DDP runs only; an aten op is not DDP
    assert "nccl_backend" not in _advice_ids(tmp_path, _events("aten::mm"), GLOO)
    assert "nccl_backend" in _advice_ids(
        tmp_path, _events("DistributedDataParallel.forward"), GLOO)


def test_the_nccl_backend_needs_no_nccl_event(tmp_path):
    # backend nccl written in distributedInfo is enough; no nccl: event or kernel in the trace
    assert "nccl_backend" not in _advice_ids(
        tmp_path, _events("DistributedDataParallel.forward"), NCCL)


def test_nccl_events_are_enough_without_the_backend(tmp_path):
    events = _events("DistributedDataParallel.forward", "nccl:all_reduce")
    assert "nccl_backend" not in _advice_ids(tmp_path, events, {"rank": 0})
    assert "nccl_backend" in _advice_ids(
        tmp_path, _events("DistributedDataParallel.forward", "aten::add"), {"rank": 0})


def test_used_devices_from_the_device_arg_else_the_pid(tmp_path):
    legacy = kernel(40, 20, corr=1, ext=1, device=None)  # no `device` arg: pid 0 names it
    assert used_devices(make_table([legacy], tmp_path)) == [0]
    on_3 = kernel(40, 20, corr=1, ext=1, device=3)
    assert used_devices(make_table([legacy, on_3], tmp_path)) == [0, 3]
    assert used_devices(make_table([cpu_op("aten::add", 10, 10)], tmp_path)) == []
