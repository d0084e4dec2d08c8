"""The GPU catalog (data/gpus.json) and custom devices: exact bytes, sources, names people type."""

import json
import re
from importlib import resources

import pytest

import kvmem
from kvmem import GPU, get_gpu, list_gpus

GIB = 2**30


def raw_catalog() -> dict:
    return json.loads(resources.files("kvmem").joinpath("data/gpus.json").read_text(encoding="utf-8"))


def test_catalog_is_large_and_complete():
    names = list_gpus()
    assert len(names) >= 25 and len(names) == len(set(names)) == len(raw_catalog())
    for name in names:
        gpu = get_gpu(name)
        assert isinstance(gpu.memory_bytes, int) and gpu.memory_bytes > 8 * GIB, name
        assert isinstance(gpu.bandwidth_bytes_per_s, int) and gpu.bandwidth_bytes_per_s >= 2 * 10**11, name
        assert gpu.source and gpu.vendor in ("nvidia", "amd", "intel", "apple"), name
        assert gpu.usable_memory_bytes <= gpu.memory_bytes, name


def test_memory_bytes_are_the_mib_counts_the_sources_quote():
    # Every "N x 2^20 bytes" in a memory_source is the nvidia-smi total "NMiB": the bytes must agree.
    checked = 0
    for name, entry in raw_catalog().items():
        for mib in re.findall(r"(\d+) x 2\^20", entry["memory_source"]):
            assert entry["memory_bytes"] == int(mib) * 2**20, name
            checked += 1
    assert checked >= 20


@pytest.mark.parametrize("name, printed_gib, source", [
    # vLLM "total_gpu_memory (79.22GiB)": https://github.com/vllm-project/vllm/pull/12126
    ("h100-sxm-80gb", "79.22", "vllm#12126"),
    # "Memory profiling results: total_gpu_memory=139.72GiB": https://github.com/vllm-project/vllm/issues/10702
    ("h200-sxm-141gb", "139.72", "vllm#10702"),
    # "total_gpu_memory (44.42GiB)" on L40S: https://github.com/vllm-project/vllm/issues/15815
    ("l40s-48gb", "44.42", "vllm#15815"),
    # "total GPU memory (22.30 GiB)" on an AWS g5 (A10G): awslabs/data-on-eks ray-vllm-deepseek.md
    ("a10g-24gb", "22.30", "data-on-eks"),
])
def test_usable_memory_is_what_vllm_prints_as_total(name, printed_gib, source):
    gpu = get_gpu(name)
    assert gpu.usable_memory_source == "cuda_total"
    assert f"{gpu.usable_memory_bytes / GIB:.2f}" == printed_gib
    assert gpu.memory_bytes - gpu.usable_memory_bytes > 100 * 2**20   # nvidia-smi's total is larger


def test_unified_memory_uses_the_metal_working_set():
    # 128 GiB x 0.75 = 103,079,215,104 B; ggml prints recommendedMaxWorkingSetSize = 103079.22 MB
    gpu = get_gpu("apple-m3-max-128gb")
    assert gpu.usable_memory_source == "gpu_share"
    assert gpu.usable_memory_bytes == 103_079_215_104
    assert f"{gpu.usable_memory_bytes / 1e6:.2f}" == "103079.22"


@pytest.mark.parametrize("typed, key", [
    ("h100-sxm-80gb", "h100-sxm-80gb"), ("H100", "h100-sxm-80gb"), ("NVIDIA H200", "h200-sxm-141gb"),
    ("l40s", "l40s-48gb"), ("RTX 4090", "rtx-4090-24gb"), ("rtx_3090", "rtx-3090-24gb"),
    ("a100-40gb", "a100-sxm-40gb"), ("MI300X", "mi300x-192gb"), ("b200", "b200-180gb"),
])
def test_names_people_type(typed, key):
    assert get_gpu(typed) is get_gpu(key)
    assert get_gpu(typed).name == key


def test_custom_spec_string():
    gpu = get_gpu("custom:80GiB:3.35TB/s")
    assert gpu.memory_bytes == gpu.usable_memory_bytes == 85_899_345_920
    assert gpu.bandwidth_bytes_per_s == 3_350_000_000_000
    no_bandwidth = get_gpu("custom:24GB")
    assert no_bandwidth.memory_bytes == 24_000_000_000 and no_bandwidth.bandwidth_bytes_per_s is None


def test_custom_dict_and_dataclass():
    gpu = get_gpu({"name": "lab-card", "memory": "48GiB", "bandwidth": "960GB/s"})
    assert (gpu.name, gpu.memory_bytes, gpu.bandwidth_bytes_per_s) == ("lab-card", 48 * GIB, 960_000_000_000)
    mine = GPU(name="mine", memory_bytes=32 * GIB, bandwidth_bytes_per_s=10**12)
    assert get_gpu(mine) is mine and mine.usable_memory_bytes == 32 * GIB
    assert mine.to_dict()["usable_memory_bytes"] == 32 * GIB


def test_custom_gpus_work_wherever_a_name_does():
    by_name = kvmem.fit("llama-3.1-8b", gpu="h100", context=4096, engine="ideal")
    same = dict(memory_bytes=get_gpu("h100").usable_memory_bytes, bandwidth_bytes_per_s=3_350_000_000_000)
    for gpu in (GPU(name="x", **same), {"memory": same["memory_bytes"], "bandwidth": "3.35TB/s"},
                f"custom:{same['memory_bytes']}:3.35TB/s"):
        result = kvmem.fit("llama-3.1-8b", gpu=gpu, context=4096, engine="ideal")
        assert result.max_batch == by_name.max_batch
        assert result.decode_tokens_per_s == pytest.approx(by_name.decode_tokens_per_s)


def test_unknown_name_lists_close_matches():
    with pytest.raises(ValueError, match=r"unknown GPU 'h100-sxm-81gb'; did you mean h100-sxm-80gb"):
        get_gpu("h100-sxm-81gb")
    with pytest.raises(ValueError, match=r"did you mean .*rtx-4090-24gb"):
        get_gpu("rtx-4091")


@pytest.mark.parametrize("spec, message", [
    ("custom:", "custom GPU spec must be 'custom:MEMORY[:BANDWIDTH/s]'"),
    ("custom:lots", "bytes: cannot read 'lots'"),
    ({"bandwidth": "1TB/s"}, "custom GPU dict needs 'memory'"),
    ({"memory": "8GiB", "colour": "red"}, "custom GPU dict has unknown key 'colour'"),
    (42, "gpu must be a catalog name, a custom spec or a kvmem.GPU, got 42"),
])
def test_bad_specs(spec, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        get_gpu(spec)


def test_gpu_fields_are_checked():
    with pytest.raises(ValueError, match="memory_bytes must be a positive integer number of bytes, got 0"):
        GPU(name="zero", memory_bytes=0)
    with pytest.raises(ValueError, match=r"gpu_share must be in \(0, 1\], got 1.5"):
        GPU(name="apple", memory_bytes=GIB, gpu_share=1.5)


def test_cli_gpus(capsys):
    from kvmem.cli import main
    assert main(["gpus", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["name"] for row in rows] == list_gpus()
    h100 = next(row for row in rows if row["name"] == "h100-sxm-80gb")
    assert h100["memory_bytes"] == 85_520_809_984 and h100["usable_memory_bytes"] == 85_061_827_297
    assert main(["gpus"]) == 0
    assert "h200-sxm-141gb" in capsys.readouterr().out
