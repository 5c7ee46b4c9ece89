"""Each recommendation rule's item as the UI and the findings show it: its id, title, unit and
link labels, written out here (a changed word is a changed payload); the FSDP wording; and the
compute capability read from the kernels when the device properties do not carry one."""

import pytest

from tb_plugin.analysis.advice.recommendations import (
    URL_AMP,
    URL_BACKENDS,
    URL_CHECKPOINT,
    URL_DDP,
    URL_TF32,
    Facts,
    rule_data_parallel,
    rule_dataloader,
    rule_exposed_communication,
    rule_host_compute,
    rule_launch_bound,
    rule_matrix_units,
    rule_memory,
    rule_nccl,
)

GB = 1024**3
PRICED = dict(steps_us=10_000.0, step_count=2)
TC = dict(tc_eligible_ops_kernel_ratio=0.5, kernel_tc_ratio=0.0)


def facts(**kw) -> Facts:
    kw.setdefault("average", {"Total": 100.0})
    return Facts(**kw)


CASES = [
    (rule_data_parallel, dict(uses_dp=True, used_devices=[0, 1]), "data_parallel",
     "Use DistributedDataParallel instead of DataParallel", "GPUs",
     [("DistributedDataParallel instead of DataParallel", URL_DDP)]),
    (rule_dataloader, dict(average={"Total": 100.0, "DataLoader": 20.0}), "dataloader",
     "Input data loading is slow", "%", None),
    (rule_host_compute, dict(host_compute_us=4000.0, used_devices=[0], **PRICED),
     "host_compute", "CPU work runs while the GPU waits", "%", None),
    (rule_launch_bound, dict(launch_idle_us=2000.0, kernels=200, short_kernels=150, **PRICED),
     "launch_bound", "Kernel launches keep the GPU waiting", "%", None),
    (rule_memory, dict(memory_peaks={0: 0.96 * 16 * GB},
                       device_props={0: {"totalGlobalMem": 16 * GB}}),
     "memory_limit", "Device memory usage is at the limit", "%",
     [("Gradient checkpointing", URL_CHECKPOINT), ("Automatic Mixed Precision", URL_AMP)]),
    (rule_nccl, dict(uses_ddp=True, backend="gloo", used_devices=[0], vendor="nvidia"),
     "nccl_backend", "Use the nccl backend for DistributedDataParallel", "GPUs",
     [("Which backend to use", URL_BACKENDS)]),
    (rule_matrix_units, dict(vendor="amd", used_devices=[0], **TC), "matrix_units_unused",
     "GEMMs do not use the matrix cores", "%", [("Automatic Mixed Precision", URL_AMP)]),
    (rule_matrix_units, dict(vendor="nvidia", used_devices=[0],
                             device_props={0: {"computeMajor": 8, "computeMinor": 0}}, **TC),
     "matrix_units_unused", "Enable mixed precision to use Tensor Cores", "%",
     [("Automatic Mixed Precision", URL_AMP), ("TF32", URL_TF32)]),
]


@pytest.mark.parametrize("rule,kw,rule_id,title,unit,links", CASES,
                         ids=[f"{c[0].__name__}-{c[2]}-{c[4]}-{i}" for i, c in enumerate(CASES)])
def test_item_id_title_unit_and_links(rule, kw, rule_id, title, unit, links):
    item = rule(facts(**kw))
    assert (item["id"], item["title"], item["unit"]) == (rule_id, title, unit)
    if links is not None:
        assert [(link["label"], link["url"]) for link in item["links"]] == links
        assert item["link"] == links[0][1]


def test_fsdp_advice_names_the_prefetch_options_as_written_in_python():
    text = rule_exposed_communication(facts(exposed_comm_pct=30.0, uses_fsdp=True))["text"]
    assert "forward_prefetch=True" in text and "forward_prefetch=true" not in text


@pytest.mark.parametrize("props", [{0: {}}, {0: {"computeMajor": None}}, {}],
                         ids=["no-major", "major-none", "no-properties"])
def test_capability_falls_back_to_the_kernels_when_the_properties_lack_it(props):
    # an Ampere kernel capability with no usable device property: TF32 advice for an Ampere GPU
    used = [0] if props else []
    item = rule_matrix_units(facts(vendor="nvidia", used_devices=used, device_props=props,
                                   kernel_capability=(8, 0), **TC))
    assert "Ampere/Ada" in item["text"] and "set_float32_matmul_precision" in item["text"]
    # without the kernels' capability there is nothing to judge the GPU by
    assert rule_matrix_units(facts(vendor="nvidia", used_devices=used, device_props=props,
                                   **TC)) is None


def test_a_device_capability_wins_over_the_kernels():
    item = rule_matrix_units(facts(vendor="nvidia", used_devices=[0],
                                   device_props={0: {"computeMajor": 7, "computeMinor": 0}},
                                   kernel_capability=(9, 0), **TC))
    assert "Volta" in item["text"] and "TF32" not in item["text"]


def test_minor_version_defaults_to_zero():
    # 7.x without a minor is Volta (7.0), not Turing (7.5)
    item = rule_matrix_units(facts(vendor="nvidia", used_devices=[0],
                                   device_props={0: {"computeMajor": 7}}, **TC))
    assert "Volta" in item["text"]
