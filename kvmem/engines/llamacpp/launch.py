"""`llama-server` for llama.cpp 0c1e57098 (the build llama-cpp-python 0.3.36 vendors): the flags of a fit.

Argument names from llama.cpp's common/arg.cpp at that build:
    -m         the GGUF file (kvmem sizes the model from its config or GGUF header; the path is yours)
    -c         n_ctx, total cells: context x sequences (each of the -np streams holds n_ctx / np,
               padded to 256: src/llama-context.cpp, src/llama-kv-cache.cpp)
    -np        sequences (parallel slots)
    -ngl 999   every layer on the GPU(s), as the fit assumed (weights and KV in device memory)
    -fa        flash attention on/off as planned (a quantised V cache needs it on)
    -ctk, -ctv the K and V cache types (f16, q8_0, q4_0, ...)
    -ub        n_ubatch, the compute buffer's batch (default 512)
    --swa-full, --kv-unified (-kvu)   only when the plan set them
    --mmproj, --no-mmproj-offload      the projector given (sizing options mmproj, mmproj_offload)
A build date other than the current build (option ``build``) or the MLA cache mode (set by the GGUF,
not a flag) are refused by name.
"""

from __future__ import annotations

from ...launch.base import Flag, Inputs, PlanRefused, as_value, refuse_options
from .. import engine_estimate
from ..serving import Launcher
from .entry import LlamacppDetails

RELEASE = "llama.cpp 0c1e57098 (llama-cpp-python 0.3.36)"
PROGRAM = ("llama-server",)
ALL_LAYERS = "999"
_SIZING_ONLY = {"weights_bytes", "activation_bytes", "non_torch_bytes", "n_ubatch", "type_k", "type_v", "flash_attn",
                "swa_full", "kv_unified", "n_batch", "ctx_checkpoints", "cache_ram_mib", "host_memory_bytes"}
# llama-server's host-RAM settings (kvmem.engines.llamacpp.checkpoints): flag, default (common/common.h#L631-L634)
_HOST_FLAGS = {"ctx_checkpoints": ("--ctx-checkpoints", 32, "context checkpoints per slot, as planned"),
               "cache_ram_mib": ("--cache-ram", 8192, "MiB of prompt cache, as planned")}


_PLACED_WHY = {"-ngl": "layers on the GPUs (the output layer counts as one), as the fit placed them",
               "-ts": "layers per GPU, as the fit placed them",
               "--n-cpu-moe": "the routed experts of the first layers in host RAM, as the fit placed them",
               "-ot": "these tensors on this device, as the fit placed them (the first pattern that matches wins)"}


def _placed(placement: dict) -> list:
    """The flags of the fit's placement over GPUs and host RAM (kvmem.engines.llamacpp.verdict), with
    --fit off: llama.cpp's own --fit gives up on flags set by hand (common/fit.cpp), and says so."""
    words = placement["flags"]
    pairs = [Flag(words[i], words[i + 1], _PLACED_WHY[words[i]]) for i in range(0, len(words), 2)]
    return [Flag("--fit", "off", "the placement is given below")] + pairs


def flags(inp: Inputs) -> tuple[Flag, ...]:
    s, fit, opts = inp.setup, inp.fit, inp.options
    if opts.get("build") not in (None, "current"):
        raise PlanRefused(f"llama.cpp: the command is for {RELEASE}; build={opts['build']!r} has other flags")
    refuse_options("llama.cpp", opts, {"mmproj", "mmproj_offload"}, _SIZING_ONLY)
    est = engine_estimate(s.model, engine="llama.cpp", tokens=fit.context, batch=inp.batch, kv_dtype=s.kv_dtype,
                          tp=s.tp, pp=s.pp, **s.engine_options)
    d = est.details
    assert isinstance(d, LlamacppDetails)      # a llama.cpp estimate's record
    if s.replicas > 1:
        raise PlanRefused(f"llama.cpp: one llama-server holds one copy of the model; {s.replicas} replicas need "
                          f"{s.replicas} servers (this plan is for one of {s.pp} GPU(s))")
    out = [Flag("-m", as_value(f"{s.model.name}.gguf"), "the GGUF of the model sized (its path on your machine), "
                f"weights {fit.weight_dtype}"),
           Flag("-c", str(d.n_ctx_requested),
                f"{fit.context:,} tokens x {d.n_seq} sequences: {d.cells_total:,} cells in all"),
           Flag("-np", str(d.n_seq), f"{d.n_seq} sequences at once, each a stream of {d.cells:,} cells"),
           *(_placed(fit.placement) if fit.placement else
             [Flag("-ngl", ALL_LAYERS, "every layer on the GPU, as the fit assumed"
                   + (f" (split by layer over {s.pp} GPUs)" if s.pp > 1 else ""))]),
           Flag("-fa", "on" if d.flash_attn else "off", "flash attention as planned (its compute buffer was sized "
                "for it)"),
           Flag("-ctk", d.type_k, f"K cache in {d.type_k}"),
           Flag("-ctv", d.type_v, f"V cache in {d.type_v}"),
           Flag("-ub", str(d.n_ubatch), "the micro-batch the compute buffer was sized for")]
    if d.swa_full:
        out.append(Flag("--swa-full", "", "sliding layers keep the full context, as planned"))
    if d.kv_unified:
        out.append(Flag("--kv-unified", "", "one cell buffer shared by all sequences, as planned"))
    mmproj = opts.get("mmproj")
    if mmproj is not None:      # the projector the fit counted (kvmem.engines.llamacpp.offload.mmproj_option)
        path = mmproj if isinstance(mmproj, str) and mmproj.lower().endswith(".gguf") else "mmproj.gguf"
        out.append(Flag("--mmproj", as_value(path), "the multimodal projector: its weights and compute buffer "
                        "were counted" + ("" if isinstance(mmproj, str) else " (its path on your machine)")))
        if opts.get("mmproj_offload", True) is False:
            out.append(Flag("--no-mmproj-offload", "", "the projector on the host, as planned"))
    for name, (flag, default, why) in _HOST_FLAGS.items():
        if s.sizing.get(name, default) != default:
            out.append(Flag(flag, str(s.sizing[name]), why))
    return tuple(out)


LAUNCHER = Launcher(RELEASE, PROGRAM, flags)
