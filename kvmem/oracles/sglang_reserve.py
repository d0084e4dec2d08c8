"""SGLang 0.5.23's own ServerArgs resolution, run on the CPU, as the judge of kvmem's default mem_fraction_static
without data-parallel attention (kvmem.engines.sglang.budget: the activation and CUDA-graph reserve).

For one setting (a model config, the GPU's capacity in MiB, tp, an optional --max-running-requests) SGLang's
ServerArgs(...).resolve_once() runs its arg_groups handlers (memory_hook.handle_gpu_memory_settings and
reserve_for_graph_mb) with get_device_memory_capacity patched to the GPU's MiB; its resolved
mem_fraction_static, chunked_prefill_size and decode graph max_bs are compared with kvmem's.
"""

from __future__ import annotations

from unittest import mock

from .report import Check
from .sglang_runtime import config_dir
from .sglang_runtime import load as _load_sglang

__all__ = ["resolved", "run_case", "directed_cases"]

MIB = 1 << 20


def resolved(cfg: dict, *, gpu_mib: int, tp: int, max_running_requests: int | None = None) -> dict:
    """SGLang's resolved server arguments for the setting."""
    _load_sglang()
    import sglang.srt.arg_groups.memory_hook as memory_hook
    from sglang.srt.server_args import ServerArgs
    args = dict(model_path=config_dir(cfg), tp_size=tp, device="cuda")
    if max_running_requests is not None:
        args.update(max_running_requests=max_running_requests)
    with mock.patch.object(memory_hook, "get_device_memory_capacity", lambda *_a: float(gpu_mib)):
        server_args = ServerArgs(**args)
        server_args.resolve_once()
    return server_args.resolved_dict()


def run_case(name: str, *, model: str, gpu_mib: int, tp: int, max_running_requests: int | None = None) -> list[Check]:
    from ..catalog import preset
    from ..engines.sglang.budget import sglang_chunked_prefill_size, sglang_mem_fraction_static
    theirs = resolved(preset(model)["config"], gpu_mib=gpu_mib, tp=tp, max_running_requests=max_running_requests)
    ours = sglang_mem_fraction_static(gpu_mib * MIB, tp=tp, max_running_requests=max_running_requests)
    return [Check(name, "mem_fraction_static", float(ours), theirs["mem_fraction_static"]),
            Check(name, "chunked_prefill_size", sglang_chunked_prefill_size(gpu_mib * MIB),
                  theirs["chunked_prefill_size"])]


def directed_cases() -> list[dict]:
    """An MHA and an MLA model on a GPU of each memory bucket (16, 24, 32, 48, 80, 141, 180 GB), tp 1 and 4, and
    --max-running-requests below the default graph size."""
    gpus = (15360, 24564, 32607, 46068, 81559, 143771, 183359)   # nvidia-smi totals in MiB
    out = [dict(name=f"{m} {g} MiB tp{tp}", model=m, gpu_mib=g, tp=tp)
           for m in ("llama-3.1-8b", "deepseek-v2-lite") for g in gpus for tp in (1, 4)]
    out += [dict(name=f"llama-3.1-8b {g} MiB tp1 mrr {r}", model="llama-3.1-8b", gpu_mib=g, tp=1,
                 max_running_requests=r) for g, r in ((81559, 64), (24564, 16), (143771, 300))]
    return out
