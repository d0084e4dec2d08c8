"""SGLang's CUDA-graph memory, as its startup log states it, against the reserve its memory rule leaves for it.

SGLang sizes the KV pool BEFORE it captures its graphs (sglang@v0.5.23
python/sglang/srt/mem_cache/kv_cache_configurator.py#L2990-L3060 _profile_available_bytes):
    rest = free after the weights - free before the weights x (1 - mem_fraction_static)   (GB = 2**30 B)
so the graphs, and then every activation, must fit in what the pool leaves: free_before x (1 - mem_fraction_static),
the same room kvmem's SGLang budget reports as activations (kvmem.engines.sglang.budget._budget). The default
mem_fraction_static reserves for the decode graph only max_bs x 2 MiB (arg_groups/memory_hook.py#L357-L395
reserve_for_graph_mb) beside 1.5 MiB per chunked-prefill token and a 10 GiB floor above 60 GiB (#L296-L317);
published captures took far more than 2 MiB per batch size (docs/research/sglang_cudagraph_logs.md: 6.19 GB for
160 graphs of Llama-4-Maverick, sglang#8538), so the floor and the activation term are what cover them.
(SGLANG_ENABLE_POST_CAPTURE_KV_SIZING, off by default in 0.5.23 (environ.py#L640), sizes the pool after capture.)

The lines, each printed by every rank (the largest is read; "avail mem" is the free memory after it):
    0.5.23: "Capture target decode CUDA graph end. bs=[1, 2, ...], elapsed=T s, mem usage=Y GB, avail mem=Z GB."
            "Capture target prefill CUDA graph end. elapsed=T s, mem usage=Y GB, avail mem=Z GB."
            (model_executor/model_runner_components/cuda_graph_setup.py#L694-L699, #L786-L792; "verify" for a
            speculative target, "draft" for its draft worker, "NPU graph" etc. off CUDA; the draft's
            "Capture draft decode|extend CUDA graph end." speculative/eagle_worker_v2.py#L531-L537, #L652-L658,
            "... step=S, ..." per step, multi_layer_eagle_draft_extend_cuda_graph_runner.py#L640-L645, and
            "Capture UNO tree draft CUDA graph end." uno_worker_v2.py#L185-L191: each phase summed)
    before: "Capture cuda graph end. Time elapsed: T s. mem usage=Y GB. avail mem=Z GB."
            "Capture cuda graph end. Time elapsed: T s. avail mem=Z GB. mem usage=Y GB."   (early 2025)
            "Capture piecewise CUDA graph end. Time elapsed: T s. mem usage=Y GB. avail mem=Z GB."
            "Capture cuda graph bs [1, 2, 4, ...]"   (the decode batch sizes)
    "Load weight begin. avail mem=F GB"   (model_runner.py#L1274; F: free_before)
    "Load weight end. ... avail mem=A GB, mem usage=W GB."   (model_runner.py#L1371-L1379; W: the weights' bytes)
    "Memory pool end. avail mem=P GB"   (kv_cache_configurator.py#L498-L501: the room the pool left)
With F and mem_fraction_static (server_args, the command, or given) the reserve is F x (1 - mem_fraction_static)
and the graphs (decode + prefill) are checked against it; without them, against P, the room measured.
"""

from __future__ import annotations

import re
from fractions import Fraction

from ...logcheck.base import GIB, LineCheck, logged_number, strip_prefix

MIB = 1 << 20
GRAPH_MIB_PER_BS = 2           # memory_hook.py#L364-L368: reserved_mem += decode max_bs x 2 (MiB)
ACTIVATION_MIB_PER_TOKEN = Fraction(3, 2)    # memory_hook.py#L304-L310: activation_tokens x 1.5 (MiB)
ACTIVATION_MIN_TOKENS = 2048                 # max(chunked_prefill_size, 2048)
CONSTANT_MIB = 512                           # memory_hook.py#L308-L309: "constant meta data"

# Each pattern starts with a literal and repeats only a character class a separator ends (linear in a line).
_GB = r"([0-9]+(?:\.[0-9]+)?) *GB"
END_NOW = re.compile(r"Capture ((?:target|draft|UNO tree draft)(?: (?:decode|verify|prefill|extend))?) \w+ graph "
                     r"end\. +(?:step=(\d+), +)?(?:bs=\[([0-9, ]*)\], +)?elapsed=[0-9.]+ *s, +mem usage=" + _GB
                     + r", +avail mem=" + _GB)
END_BEFORE = re.compile(r"Capture (cuda|piecewise CUDA) graph end\. +Time elapsed: *[0-9.]+ *s\. +mem usage="
                        + _GB + r"\. +avail mem=" + _GB)
END_EARLY = re.compile(r"Capture cuda graph end\. +Time elapsed: *[0-9.]+ *s\. +avail mem=" + _GB + r"\. +mem usage="
                       + _GB)        # early 2025 (v0.4.3): avail mem before mem usage
BS_BEFORE = re.compile(r"Capture cuda graph bs \[([0-9, ]*)\]")
LOAD_BEGIN = re.compile(r"Load weight begin\. +avail mem=" + _GB)
LOAD_END = "Load weight end. "                      # then its numbers, searched from there (one pass a line)
LOAD_END_NUMBERS = re.compile(r"avail mem=" + _GB + r", +mem usage=" + _GB)
POOL_END = re.compile(r"Memory pool end\. +avail mem=" + _GB)


def _gib(text: str, n: int, line: str) -> int:
    """A "X.YZ GB" the log prints (GB = 2**30 B, utils/common.py#L576), in bytes."""
    return round(logged_number(text, n, line, float) * GIB)


def _bs(text: str | None, n: int, line: str) -> list[int]:
    return [logged_number(b.strip(), n, line) for b in text.split(",") if b.strip()] if text else []


def read_graph_lines(lines: list[str]) -> dict:
    """The capture, weight-load and pool lines: phase -> (line, text, bytes, avail bytes, batch sizes), the
    largest capture of each phase over the ranks; "load_begin", "load_end", "pool_end" the first of each."""
    found: dict = {"graphs": {}}
    for n, line in enumerate(lines, 1):
        if "Capture" in line:
            if m := END_NOW.search(line):
                # each step of a multi-layer draft extend is a graph of its own
                phase = m.group(1) + (f" step {m.group(2)}" if m.group(2) else "")
                bs, used, avail = _bs(m.group(3), n, line), m.group(4), m.group(5)
            elif m := END_BEFORE.search(line):
                phase, bs, used, avail = ("decode" if m.group(1) == "cuda" else "piecewise", [], m.group(2),
                                          m.group(3))
            elif m := END_EARLY.search(line):
                phase, bs, used, avail = "decode", [], m.group(2), m.group(1)
            else:
                if (m := BS_BEFORE.search(line)) and "bs" not in found:
                    found["bs"] = _bs(m.group(1), n, line)
                continue
            entry = (n, strip_prefix(line, "Capture"), _gib(used, n, line), _gib(avail, n, line), bs)
            if phase not in found["graphs"] or entry[2] > found["graphs"][phase][2]:
                found["graphs"][phase] = entry
        elif "load_begin" not in found and (m := LOAD_BEGIN.search(line)):
            found["load_begin"] = (n, _gib(m.group(1), n, line))
        elif ("load_end" not in found and (at := line.find(LOAD_END)) >= 0
              and (m := LOAD_END_NUMBERS.search(line, at))):
            found["load_end"] = (n, strip_prefix(line, "Load weight end"), _gib(m.group(1), n, line),
                                 _gib(m.group(2), n, line))
        elif "pool_end" not in found and (m := POOL_END.search(line)):
            found["pool_end"] = (n, _gib(m.group(1), n, line))
    return found


def default_reserve_mib(*, chunked_prefill_size: int, max_bs: int, tp: int = 1, pp: int = 1,
                        gpu_mib: int | None = None) -> Fraction:
    """SGLang 0.5.23's activation + decode-graph reserve in MiB (memory_hook.py#L296-L317, no DP attention, no
    prefill graph, no DeepEP: kvmem.engines.sglang.budget.sglang_mem_fraction_static has them all)."""
    reserved = (CONSTANT_MIB + ACTIVATION_MIB_PER_TOKEN * max(chunked_prefill_size, ACTIVATION_MIN_TOKENS)
                + Fraction(tp * pp, 8) * 1024 + GRAPH_MIB_PER_BS * max_bs)
    if gpu_mib is not None and gpu_mib > 60 * 1024:
        reserved = max(reserved, Fraction(10 * 1024))
    return reserved


def _setting(info: dict, name: str, kind):
    """A setting the log printed or the caller gave, refused naming it when it is not what SGLang takes."""
    value = info.get(name)
    if value is None:
        return None
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r:.60}")
        return value
    try:
        fraction = Fraction(str(value)) if not isinstance(value, bool) else None
    except (ValueError, ZeroDivisionError):
        fraction = None
    if fraction is None or not 0 < fraction <= 1:
        raise ValueError(f"{name} must be a number in (0, 1], got {value!r:.60}")
    return fraction


def _gb(n_bytes: int | Fraction) -> str:
    return f"{float(n_bytes) / GIB:.2f} GB"


def check_graph_lines(found: dict, *, info: dict, options: dict, settings: dict, checks: list,
                      notes: list) -> None:
    """The graphs the log captured against the reserve (module docstring); notes for what it cannot check."""
    graphs = found.get("graphs") or {}
    if not graphs:
        return
    used = sum(entry[2] for entry in graphs.values())
    settings["cuda_graph_bytes"] = used
    last = max(graphs.values(), key=lambda e: e[0])
    mfs = _setting({**info, **options}, "mem_fraction_static", Fraction)
    phases = " + ".join(f"{name} {_gb(entry[2])}" for name, entry in graphs.items())
    if "load_begin" in found and mfs is not None:
        free_before = found["load_begin"][1]
        reserve = free_before * (1 - mfs)
        settings["reserve_bytes"] = int(reserve)
        ok = used <= reserve
        checks.append(LineCheck(last[0], last[1], "CUDA graph memory within the reserve", phases,
                                f"<= {_gb(reserve)} (free before the weights {_gb(free_before)} x "
                                f"(1 - {float(mfs):g}))", ok,
                                "" if ok else (
                                    "the graphs took more than the room SGLang leaves beside the KV pool, which it "
                                    "sizes before capture: capture can run out of memory; lower "
                                    "--mem-fraction-static or --cuda-graph-max-bs")))
        notes.append(f"after capture {_gb(reserve - used)} of the {_gb(reserve)} reserve is left for activations "
                     f"(kvmem's SGLang budget counts the whole reserve as activation room)")
    elif "pool_end" in found:
        n, room = found["pool_end"]
        ok = used <= room
        checks.append(LineCheck(last[0], last[1], "CUDA graph memory within the room the pool left", phases,
                                f"<= {_gb(room)} (line {n}: Memory pool end)", ok, "" if ok else (
                                    "the graphs took more than the memory free after the KV pool")))
    else:
        notes.append(f"line {last[0]}: the graphs took {_gb(used)}; the reserve they fit in needs 'Load weight begin. "
                     "avail mem' and mem_fraction_static (or 'Memory pool end'), which the log does not print")
    bs = next((entry[4] for entry in graphs.values() if entry[4]), None) or found.get("bs")
    max_bs = max(bs) if bs else _setting(info, "cuda_graph_max_bs", int)
    if max_bs:
        settings["cuda_graph_max_bs"] = max_bs
        term = GRAPH_MIB_PER_BS * max_bs * MIB
        decode = sum(entry[2] for name, entry in graphs.items() if name in ("decode", "target decode", "target verify"))
        if decode > term:
            notes.append(f"the decode graphs took {_gb(decode)}, above the {GRAPH_MIB_PER_BS} MiB x max_bs "
                         f"{max_bs} = {_gb(term)} SGLang's default mem_fraction_static sets aside for them "
                         "(memory_hook.py reserve_for_graph_mb): the rest of the reserve (the activation term, and "
                         "above 60 GiB the 10 GiB floor) has to hold them")
    chunk = info.get("chunked_prefill_size")
    chunk = None if chunk == -1 else _setting(info, "chunked_prefill_size", int)     # -1: chunking off
    if chunk:
        activations = (ACTIVATION_MIB_PER_TOKEN * max(chunk, ACTIVATION_MIN_TOKENS) + CONSTANT_MIB) * MIB
        if last[3] < activations:
            notes.append(f"line {last[0]}: {_gb(last[3])} is free after capture, below the {_gb(activations)} "
                         f"SGLang's rule allows a chunked prefill of {chunk} tokens (1.5 MiB a token + 512 MiB): "
                         "a long prefill may run out of memory")
    _check_load(found, mfs, settings)


def _check_load(found: dict, mfs, settings: dict) -> None:
    """The weights' bytes SGLang measured, and with mem_fraction_static the KV pool's budget it sized:
    rest = free after the weights - free before x (1 - mem_fraction_static)."""
    if "load_begin" not in found or "load_end" not in found:
        return
    free_before = found["load_begin"][1]
    _, _, free_after, weights = found["load_end"]
    settings["weights_bytes_logged"] = weights
    if mfs is not None:
        settings["kv_budget_bytes"] = int(free_after - free_before * (1 - mfs))
