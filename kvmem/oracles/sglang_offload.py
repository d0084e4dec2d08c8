"""SGLang 0.5.23's own HiCache code as the judge of kvmem.engines.sglang.hicache.

Run on the CPU, per case: the host pool's size_per_token from the host pool classes' own
``get_size_per_token`` (pool_host/mha.py, the MLA rule of pool_host/mla.py), its size and padding page
from ``HostKVCache.__init__`` (pool_host/base.py; built ``is_dummy``, so no buffer is allocated), the
start-up refusal from ``_allocate_host_buffer`` against a host whose free RAM is the case's (psutil's
answer replaced), and auto-sizing from ``auto_size_hicache`` (hicache_auto_size.py) with the device pool's
bytes and the memory settings handed in (the server-args context it reads is replaced by them).
"""

from __future__ import annotations

import types

from ..engines.sglang.details import SglangCapacityDetails
from ..engines.sglang.hicache import model_hicache_tier
from ..engines.vllm.offload import OffloadTier
from .report import Check

GIB = 1 << 30


def _sglang():
    from .sglang_runtime import load
    load()
    import torch
    from sglang.srt.mem_cache import hicache_auto_size
    from sglang.srt.mem_cache.pool_host import base
    from sglang.srt.mem_cache.pool_host.mha import MHATokenToKVPoolHost
    return types.SimpleNamespace(torch=torch, base=base, auto=hicache_auto_size, mha=MHATokenToKVPoolHost)


def _size_per_token(s, model, tp: int) -> int:
    from ..parallel import kv_heads_per_rank
    layer = model.layers[0]
    if layer.kind == "mla":      # pool_host/mla.py: kv_cache_dim x dtype.itemsize x layer_num
        return (layer.kv_lora_rank + layer.qk_rope_head_dim) * s.torch.bfloat16.itemsize * model.num_layers
    shape = types.SimpleNamespace(head_dim=layer.head_dim_k, v_head_dim=layer.head_dim_v,
                                  head_num=kv_heads_per_rank(layer.kv_heads, tp), layer_num=model.num_layers,
                                  dtype=s.torch.bfloat16)
    return s.mha.get_size_per_token(shape)


def _host_pool(s, *, device_tokens, size_per_token, ratio, size_gb, page_size, available):
    """HostKVCache.__init__ and _allocate_host_buffer as SGLang runs them; ('refused', message) or the pool."""
    class Probe(s.base.HostKVCache):
        layer_num = target_layer_num = 1

        def init_kv_buffer(self):
            return None
    Probe.__abstractmethods__ = frozenset()
    probe = Probe(dtype=s.torch.bfloat16, device_capacity_tokens=device_tokens, size_per_token=size_per_token,
                  start_layer=0, end_layer=0, host_to_device_ratio=ratio, host_size=size_gb, page_size=page_size,
                  layout="layer_first", pin_memory=False, device="cpu", is_dummy=True)
    original = s.base.available_host_memory_bytes
    s.base.available_host_memory_bytes = lambda **_: available
    try:
        probe._allocate_host_buffer()
    except ValueError as error:
        return "refused", str(error)
    finally:
        s.base.available_host_memory_bytes = original
    return probe, None


def _auto_ratio(s, *, requested: float, fraction: float, device_bytes: int, available: int) -> float:
    """auto_size_hicache's ratio with this device pool and host (its context stand-ins: see the docstring)."""
    seen = {}
    memory = types.SimpleNamespace(hicache_host_memory_fraction=fraction, hicache_ratio=requested)
    saved = (s.auto.get_memory, s.auto.get_context, s.auto._estimate_hicache_bytes, s.base.available_host_memory_bytes)
    s.auto.get_memory = lambda: memory
    s.auto.get_context = lambda: types.SimpleNamespace(override=lambda _source, **f: seen.update(f))
    s.auto._estimate_hicache_bytes = lambda _params, _plan: device_bytes
    s.base.available_host_memory_bytes = lambda **_: available
    try:
        with s.auto.auto_size_hicache(None, None, enabled=True):
            pass
    finally:
        s.auto.get_memory, s.auto.get_context, s.auto._estimate_hicache_bytes, \
            s.base.available_host_memory_bytes = saved
    return seen["hicache_ratio"]


def run_case(name: str, model, *, kv_memory: int, tp: int = 1, host_available_bytes: int,
             hicache_ratio=None, hicache_size=0, auto: bool = False) -> list[Check]:
    s = _sglang()
    opts = {} if auto else dict(hicache_ratio=hicache_ratio, hicache_size=hicache_size)
    try:
        ours = model_hicache_tier(model, kv_memory=kv_memory, tp=tp, ranks_per_node=1,
                                  host_available_bytes=host_available_bytes, **opts)
        refused = None
    except ValueError as error:
        ours, refused = None, str(error)
    from ..engines import capacity
    d: SglangCapacityDetails = capacity(  # type: ignore[assignment]  # engine="sglang": SGLang's record
        model, engine="sglang", kv_memory=kv_memory, tp=tp, max_model_len=None).details
    spt = _size_per_token(s, model, tp)
    checks = [Check(name, "size_per_token", d.cell_bytes_per_token, spt)]
    ratio = 2.0 if hicache_ratio is None else hicache_ratio
    if auto:
        ratio = _auto_ratio(s, requested=2.0, fraction=0.8, device_bytes=d.pools[0]["k_bytes"] + d.pools[0]["v_bytes"],
                            available=host_available_bytes)
    pool, message = _host_pool(s, device_tokens=d.max_total_num_tokens, size_per_token=spt, ratio=ratio,
                               size_gb=0 if auto else hicache_size, page_size=d.page_size,
                               available=host_available_bytes if not auto else
                               int((host_available_bytes - 10 * GIB) * 0.8) + 10 * GIB)
    checks.append(Check(name, "refused", refused is not None, pool == "refused"))
    if pool == "refused":
        checks.append(Check(name, "SGLang's message in kvmem's", True, message in (refused or "")))
        return checks
    if ours is None:        # kvmem refused where SGLang makes the pool: the "refused" check above records it
        return checks
    checks += [Check(name, "host tokens", ours.tokens, pool.size),
               Check(name, "host pages", ours.chunks, pool.page_num),
               Check(name, "host bytes per rank", ours.host_bytes_per_rank, pool.size * pool.size_per_token)]
    return checks


def directed_cases() -> list[dict]:
    """A dense and an MLA model, with the ratio, a size in GB, auto-sizing and a ratio the host cannot hold."""
    from ..catalog import get_model
    cases = []
    for preset, tp in (("llama-3.1-8b", 1), ("llama-3.1-70b", 4), ("deepseek-v2-lite", 1), ("deepseek-v3", 8)):
        model = get_model(preset)
        for label, extra in (("ratio 2.5", dict(hicache_ratio=2.5)), ("size 40 GB", dict(hicache_size=40)),
                             ("auto", dict(auto=True))):
            cases.append(dict(name=f"{preset} tp{tp} {label}", model=model, kv_memory=20 * GIB, tp=tp,
                              host_available_bytes=256 * GIB, **extra))
        cases.append(dict(name=f"{preset} tp{tp} auto on 48 GiB", model=model, kv_memory=20 * GIB, tp=tp,
                          host_available_bytes=48 * GIB, auto=True))
        cases.append(dict(name=f"{preset} tp{tp} ratio 20 on 64 GiB", model=model, kv_memory=20 * GIB, tp=tp,
                          host_available_bytes=64 * GIB, hicache_ratio=20.0))
    return cases


def run_swa_case(name: str, model, *, kv_memory: int, host_available_bytes: int, hicache_ratio=None,
                 hicache_size=0) -> list[Check]:
    """A hybrid sliding-window model: one HostKVCache per device pool (full, then SWA), --hicache-size split by
    SGLang's own _split_hicache_size, each pool checked against the RAM the one before left."""
    s = _sglang()
    from sglang.srt.mem_cache.hybrid_cache.hybrid_pool_assembler import _split_hicache_size

    from ..engines import capacity
    try:
        ours: OffloadTier = model_hicache_tier(model, kv_memory=kv_memory, ranks_per_node=1,
                                               host_available_bytes=host_available_bytes,
                                               hicache_ratio=hicache_ratio, hicache_size=hicache_size)
        refused = None
    except ValueError as error:
        ours, refused = None, str(error)  # type: ignore[assignment]  # read below only when refused is None
    pools = sorted(capacity(model, engine="sglang", kv_memory=kv_memory, max_model_len=None).details.pools,
                   key=lambda p: p["role"])
    stubs = [types.SimpleNamespace(get_kv_size_bytes=lambda p=p: (p["k_bytes"], p["v_bytes"])) for p in pools]
    shares = _split_hicache_size(hicache_size, tuple(stubs)) if hicache_size else (None,) * len(pools)
    sizes, available, message = [], host_available_bytes, None
    for pool, share in zip(pools, shares, strict=True):
        per_token = (pool["k_bytes"] + pool["v_bytes"]) // (pool["num_tokens"] + pool["page_size"])
        made, message = _host_pool(s, device_tokens=pool["num_tokens"], size_per_token=per_token,
                                   ratio=2.0 if hicache_ratio is None else hicache_ratio,
                                   size_gb=share or 0, page_size=pool["page_size"], available=available)
        if made == "refused":
            break
        sizes.append((made.size, made.size * made.size_per_token))
        available -= made.size * made.size_per_token
    checks = [Check(name, "refused", refused is not None, message is not None)]
    if message is not None or refused is not None:
        return checks
    (full_tokens, full_bytes), (_, swa_bytes) = sizes
    return checks + [Check(name, "full host pool tokens", ours.tokens, full_tokens),
                     Check(name, "host bytes (full + SWA)", ours.host_bytes_per_rank, full_bytes + swa_bytes)]


def swa_cases() -> list[dict]:
    from ..catalog import get_model
    model = get_model("gpt-oss-20b")
    return [dict(name="gpt-oss-20b ratio 2", model=model, kv_memory=20 * GIB, host_available_bytes=256 * GIB,
                 hicache_ratio=2.0),
            dict(name="gpt-oss-20b size 40 GB", model=model, kv_memory=20 * GIB, host_available_bytes=256 * GIB,
                 hicache_size=40),
            dict(name="gpt-oss-20b ratio 5 on 64 GiB", model=model, kv_memory=20 * GIB, host_available_bytes=64 * GIB,
                 hicache_ratio=5.0)]
