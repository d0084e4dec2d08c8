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
    -b         n_batch, only when not the default 2048
    --swa-full, --kv-unified (-kvu)   only when the plan set them
    -nkvo, -lm none                    only for kvmem.llamacpp_offload's kv_offload=False, mmap=False (this build
                                       has no --no-mmap: its --load-mode none loads without mmap)
    (server_flags writes these for kvmem plan and for llamacpp_offload's two commands alike)
    --mmproj, --no-mmproj-offload      the projector given (sizing options mmproj, mmproj_offload)
A build date other than the current build (option ``build``) or the MLA cache mode (set by the GGUF,
not a flag) are refused by name, and so is n_rs_seq > 0: llama-server sets it (and nextn's MTP layers) only with
--spec-type draft-mtp / eagle3 / dflash / dspark, which also run a draft context kvmem does not size (_UNFLAGGED).
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


def server_flags(n_seq: int, *, n_ubatch: int = 512, type_k="f16", type_v="f16", flash_attn=None,
                 n_batch: int = 2048, swa_full: bool = False, kv_unified: bool = False, kv_offload: bool = True,
                 mmap: bool = True, every: bool = False, **_layout) -> list[Flag]:
    """The flags that size llama-server's cache and buffers, -np first (kvmem plan's command and
    kvmem.llamacpp_offload's two): ``every`` writes -fa, -ctk, -ctv and -ub also at llama-server's defaults
    (flash_attn None, "auto", is then left out; defaults: common/common.h#L453-L454 n_batch 2048, n_ubatch 512,
    #L501 flash attention auto, #L589 cache types f16). -np is always written: without it llama-server runs 4 slots
    with a unified cache, and a sliding-window cache of 4 x n_swa + n_ubatch cells, not the cache sized."""
    # llama.cpp@0c1e57098 common/arg.cpp#L1403 (-np auto for the server), tools/server/server.cpp#L156-L160 (auto:
    # 4 slots, kv_unified), src/llama-kv-cache-iswa.cpp#L73 (the SWA cells: n_swa x n_seq_max + n_ubatch, unified)
    out = [Flag("-np", str(n_seq), f"{n_seq} sequence(s) at once, as sized (llama-server's default is 4 slots)")]
    if flash_attn is not None and str(flash_attn).strip().lower() != "auto":  # True/False or settings.py's words
        on = flash_attn is True or str(flash_attn).strip().lower() in ("on", "enabled")
        out.append(Flag("-fa", "on" if on else "off", "flash attention as sized (its compute buffer was sized for it)"))
    for flag, value, default, why in (("-ctk", type_k, "f16", "K cache in"), ("-ctv", type_v, "f16", "V cache in"),
                                      ("-ub", n_ubatch, 512, "the micro-batch the compute buffer was sized for:"),
                                      ("-b", n_batch, 2048, "the logical batch the outputs were sized for:")):
        if value != default or (every and flag != "-b"):
            out.append(Flag(flag, str(value), f"{why} {value}"))
    if swa_full:
        out.append(Flag("--swa-full", "", "sliding layers keep the full context, as sized"))
    if kv_unified:
        out.append(Flag("--kv-unified", "", "one cell buffer shared by all sequences, as sized"))
    if not kv_offload:
        out.append(Flag("-nkvo", "", "the KV cache in host RAM, as placed"))
    if not mmap:    # llama.cpp@0c1e57098 common/arg.cpp#L2690-L2708 (-lm, --load-mode; no --no-mmap at this build),
        # src/llama-model-loader.cpp#L559 (use_mmap only for auto, mmap, mmap+mlock)
        out.append(Flag("-lm", "none", "the weights read into memory, not mapped, as placed"))
    return out


def cache_words(kw: dict) -> list[tuple[str, str]]:
    """server_flags of a layout's settings (kvmem.engines.llamacpp.offload), as (flag, value) pairs."""
    return [(f.flag, f.value) for f in server_flags(kw.get("n_seq", 1), **{k: v for k, v in kw.items()
                                                                          if k != "n_seq"})]


def cache_settings(*, n_batch: int = 2048, swa_full: bool = False, kv_unified: bool = False, build=None, mla=None,
                   nextn: bool = False, n_rs_seq=None) -> dict:
    """The cache's settings a layout takes beside its flags (layouts.layout), None taken as the default."""
    return dict(n_batch=2048 if n_batch is None else n_batch, swa_full=bool(swa_full), kv_unified=bool(kv_unified),
                build=build, mla=mla, nextn=bool(nextn), n_rs_seq=n_rs_seq)


# The draft flags that carry n_rs_seq and nextn at the pinned build: llama-server sets n_rs_seq to --spec-draft-n-max
# (default 3, common/common.h#L328) when --spec-type names draft-mtp, eagle3, dflash or dspark
# (llama.cpp@0c1e57098 common/common.h#L396-L402, common/common.cpp#L1635) and loads the MTP layers (load_mtp) for
# draft-mtp (common/common.cpp#L1625); each also builds a draft context of the target's n_ctx (an MTP context on the
# same weights, or a draft model's: common/speculative.cpp#L2517-L2535), which kvmem does not size. So the commands
# carry no --spec-type, and the sized setting is named beside them instead.
_DRAFT_ONLY = ("llama-server sets it only with --spec-type draft-mtp, eagle3, dflash or dspark, which also run a draft "
               "context kvmem does not size; these commands carry no --spec-type")
_UNFLAGGED = {"build": "no llama-server flag of {release} sets it: the commands are written with this build's flags",
              "mla": "no llama-server flag of {release} sets it: the MLA cache's mode is the GGUF's",
              "nextn": "the MTP layers load under --spec-type draft-mtp alone (load_mtp); " + _DRAFT_ONLY,
              "n_rs_seq": "the rollback snapshots are --spec-draft-n-max (default 3): " + _DRAFT_ONLY}


def unflagged_notes(kw: dict) -> tuple:
    """Notes for the settings the placements honour that the commands do not carry, each with why."""
    return tuple(f"{name}={kw[name]!r}: in both placements; {why.format(release=RELEASE)}"
                 for name, why in _UNFLAGGED.items() if kw.get(name) not in (None, False, 0, "current"))


def flags(inp: Inputs) -> tuple[Flag, ...]:
    s, fit, opts = inp.setup, inp.fit, inp.options
    if opts.get("build") not in (None, "current"):
        raise PlanRefused(f"llama.cpp: the command is for {RELEASE}; build={opts['build']!r} has other flags")
    if opts.get("n_rs_seq"):
        raise PlanRefused(f"llama.cpp: n_rs_seq={opts['n_rs_seq']!r}: {_UNFLAGGED['n_rs_seq']}")
    # n_rs_seq 0: llama-server's own without --spec-type (common/common.h#L396-L402)
    refuse_options("llama.cpp", opts, {"mmproj", "mmproj_offload", "n_rs_seq"}, _SIZING_ONLY)
    pp = s.pp
    est = engine_estimate(s.model, engine="llama.cpp", tokens=fit.context, batch=inp.batch, kv_dtype=s.kv_dtype,
                          tp=s.tp, pp=pp, **s.engine_options)
    d = est.details
    assert isinstance(d, LlamacppDetails)      # a llama.cpp estimate's record
    if s.replicas > 1:
        raise PlanRefused(f"llama.cpp: one llama-server holds one copy of the model; {s.replicas} replicas need "
                          f"{s.replicas} servers (this plan is for one of {pp} GPU(s))")
    cache = server_flags(d.n_seq, n_ubatch=d.n_ubatch, type_k=d.type_k, type_v=d.type_v, flash_attn=bool(d.flash_attn),
                         n_batch=d.n_batch, swa_full=d.swa_full,
                         kv_unified=d.kv_unified, every=True)
    out = [Flag("-m", as_value(f"{s.model.name}.gguf"), "the GGUF of the model sized (its path on your machine), "
                f"weights {fit.weight_dtype}"),
           Flag("-c", str(d.n_ctx_requested),
                f"{fit.context:,} tokens x {d.n_seq} sequences: {d.cells_total:,} cells in all"),
           Flag("-np", str(d.n_seq), f"{d.n_seq} sequences at once, each a stream of {d.cells:,} cells"),
           # a placement with every layer on one GPU is -ngl 999's (kvmem.engines.llamacpp.verdict 'whole')
           *(_placed(fit.placement) if fit.placement and not (fit.placement.get("whole") and pp == 1) else
             [Flag("-ngl", ALL_LAYERS, "every layer on the GPU, as the fit assumed"
                   + (f" (split by layer over {pp} GPUs)" if pp > 1 else ""))]),
           *cache[1:]]
    mmproj = opts.get("mmproj")
    # the projector the fit counted (kvmem.engines.llamacpp.offload.mmproj_option)
    if mmproj is not None and not no_projector(mmproj):
        path = mmproj if isinstance(mmproj, str) and mmproj.lower().endswith(".gguf") else "mmproj.gguf"
        out.append(Flag("--mmproj", as_value(path), "the multimodal projector: its weights and compute buffer "
                        "were counted" + ("" if isinstance(mmproj, str) else " (its path on your machine)")))
        if opts.get("mmproj_offload", True) is False:
            out.append(Flag("--no-mmproj-offload", "", "the projector on the host, as planned"))
    for name, (flag, default, why) in _HOST_FLAGS.items():
        if s.sizing.get(name, default) != default:
            out.append(Flag(flag, str(s.sizing[name]), why))
    return tuple(out)


def no_projector(mmproj) -> bool:
    """mmproj=0 (or "0MB", "0 GiB"): no projector, charged nothing and given no --mmproj (offload.mmproj_option,
    this module's flags), as budget.py's other zero options (0 checkpoints, 0 MiB of prompt cache) charge nothing."""
    if isinstance(mmproj, str):
        number = mmproj.strip().rstrip("KMGTPBkmgtpbi").strip()
        return number.replace(".", "", 1).strip("0") == "" and number[:1] in ("0", ".")
    return mmproj == 0 and not isinstance(mmproj, bool)


LAUNCHER = Launcher(RELEASE, PROGRAM, flags)
