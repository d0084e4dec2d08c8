"""DeepSeek-V4's memory in llama.cpp 0c1e57098: llama_kv_cache_dsv4 (src/llama-kv-cache-dsv4.cpp).

Its GGUF (conversion/deepseek.py DeepseekV4Model, by architecture DeepseekV4ForCausalLM): head_count_kv 1,
key_length head_dim, sliding_window, compress_ratios per layer, indexer_key_length index_head_dim.
src/models/deepseek4.cpp makes every layer sliding (set_swa_pattern(0)). create_memory
(src/llama-model.cpp L2587-L2626) builds llama_kv_cache_dsv4 with kv_size = n_ctx_seq, n_pad 1 and the
context's n_rs_seq; its constructor (L1210-L1336) makes, all K-only (dsv4_make_k_only: the MLA flag, no
V tensor), every cache and state with one stream per sequence whatever kv_unified says:
    raw   llama_kv_cache_iswa, non-unified: its non-SWA half holds no layer; the SWA half every layer,
          key_length x 1 head, GGML_PAD(min(kv_size, n_swa + n_ubatch), 256) cells (kv_size with
          --swa-full; llama-kv-cache-iswa.cpp L69-L80)
    csa   the layers of compress ratio 4: key_length, GGML_PAD(max(1, ceil(kv_size / 4)), 256) cells
    hca   the layers of ratio 128: key_length, GGML_PAD(max(1, ceil(kv_size / 128)), 256) cells
    lid   the ratio-4 layers' lightning-indexer keys: indexer_key_length, the csa cells
    states (llama_dsv4_comp_state, L893-L1000) per layer, two f32 tensors (kv, score) of
          n_embd_state x state_size x n_seq x (1 + n_rs_seq):  csa 2 x key_length x 8, hca key_length x 128,
          lid 2 x indexer_key_length x 8
All caches take the context's type_k (L1255-L1311).
"""

from __future__ import annotations

from ...dtypes import dtype
from ...model import Model
from ...units import cdiv, pad
from .settings import CURRENT, Settings, kvmem_dtype, printed_mib

__all__ = ["DSV4_TYPES", "CONVERTER_KEYS", "dsv4_caches", "dsv4_log_lines"]

DSV4_TYPES = ("deepseek_v4", "deepseek_ref")
CSA, HCA = 4, 128                           # llama.cpp@0c1e57098 src/llama-kv-cache-dsv4.cpp#L18-L19
STATE_ROWS = {CSA: 2 * CSA, HCA: HCA}       # state_size: 2 x ratio for CSA and the indexer, ratio for HCA
# The config keys conversion/deepseek.py DeepseekV4Model.set_gguf_parameters (L659-L689) reads with
# hparams[...]; a file without one does not convert (KeyError)
CONVERTER_KEYS = ("num_hidden_layers", "qk_rope_head_dim", "q_lora_rank", "sliding_window", "moe_intermediate_size",
                  "n_shared_experts", "routed_scaling_factor", "norm_topk_prob", "swiglu_limit", "index_n_heads",
                  "index_head_dim", "index_topk", "o_groups", "o_lora_rank", "compress_ratios",
                  "compress_rope_theta", "hc_mult", "hc_sinkhorn_iters", "hc_eps", "num_hash_layers")


def comp_cells(kv_size: int, ratio: int) -> int:
    """dsv4_comp_size (L28-L30) padded to 256 (L1294, L1302, L1310)."""
    return pad(max(1, cdiv(kv_size, ratio)), 256)


def _check(model: Model, s: Settings) -> list[int]:
    """The layers' compress ratios as the GGUF holds them; refusals where llama.cpp would not load it."""
    cfg = model.config or {}
    missing = [key for key in CONVERTER_KEYS if key not in cfg]
    if missing:
        raise ValueError(f"{model.name}: llama.cpp's converter (conversion/deepseek.py DeepseekV4Model."
                         f"set_gguf_parameters) reads {', '.join(missing)}, which this config does not set: it does "
                         "not convert (KeyError), so there is no GGUF to load")
    ratios = cfg["compress_ratios"]
    n = model.num_layers
    if not isinstance(ratios, list) or len(ratios) < n:
        raise ValueError(f"{model.name}: \"DeepSeek-V4 compress_ratios is shorter than block_count\" "
                         "(src/models/deepseek4.cpp load_arch_hparams)")
    ours = [layer.compressor.rate if layer.compressor else 0 for layer in model.layers]
    if list(ratios[:n]) != ours or any(r not in (0, CSA, HCA) for r in ours):
        raise ValueError(f"{model.name}: compress_ratios {ratios[:n]} is not the layers kvmem read ({ours}); "
                         "llama_kv_cache_dsv4 keeps ratios 0, 4 and 128 only")
    # observed, not read: llama-cpp-python 0.3.36 dies of SIGFPE in llama_init_from_model on a deepseek4 GGUF
    # without a ratio-4 layer, or without a ratio-128 layer when the indexer key is as wide as the head
    # (tests/oracles/test_llamacpp_dsv4_oracle.py); every published DeepSeek-V4 has both, keys of 128 beside 512
    if CSA not in ours:
        raise ValueError(f"{model.name}: no layer of compress ratio 4: llama.cpp 0c1e57098 aborts (SIGFPE) creating "
                         "the context of a deepseek4 GGUF without one")
    if HCA not in ours and int(cfg.get("index_head_dim", 0)) == model.layers[0].head_dim_k:
        raise ValueError(f"{model.name}: no layer of compress ratio 128 and index_head_dim equal to head_dim: "
                         "llama.cpp 0c1e57098 aborts (SIGFPE) creating the context of such a deepseek4 GGUF")
    if int(cfg["hc_mult"]) != 4:
        raise ValueError(f"{model.name}: hc_mult {cfg['hc_mult']}: llama.cpp 0c1e57098 aborts building deepseek4's "
                         "graph at context creation with any hyper-connection count but 4 (GGML_ASSERT(hc == 4), "
                         "src/models/deepseek4.cpp#L366)")
    if model.config.get("num_key_value_heads", 1) != 1:
        raise ValueError(f"{model.name}: DeepSeek-V4's attention is one K=V head; num_key_value_heads "
                         f"{model.config['num_key_value_heads']} is not what llama.cpp's deepseek4 loads")
    if s.build != CURRENT:
        raise ValueError(f"{model.name}: llama_kv_cache_dsv4 is modelled at the vendored build 0c1e57098 only; the "
                         f"build that added it is not pinned here, so build {s.build} is refused")
    if s.nextn:
        raise ValueError(f"{model.name}: nextn with DeepSeek-V4: its MTP context's own llama_kv_cache_iswa "
                         "(create_memory, LLAMA_CONTEXT_TYPE_MTP) is not modelled")
    return ours


def dsv4_caches(model: Model, s: Settings, n_ctx_seq: int) -> tuple[list, list, int]:
    """(caches as details show them, per-layer (K, V, state) bytes, the SWA cells) of llama_kv_cache_dsv4."""
    ratios = _check(model, s)
    k_type, f32 = kvmem_dtype(s.type_k), dtype("fp32")
    streams, n = s.n_seq, model.num_layers
    width = model.layers[0].head_dim_k                              # key_length x head_count_kv 1
    index = max((layer.compressor.index_head_dim for layer in model.layers if layer.compressor), default=0) or \
        int(model.config["index_head_dim"])
    n_swa = model.layers[0].window
    swa = n_ctx_seq if s.swa_full else pad(min(n_ctx_seq, n_swa + s.n_ubatch), 256)
    cells = {CSA: comp_cells(n_ctx_seq, CSA), HCA: comp_cells(n_ctx_seq, HCA)}
    planes = streams * (1 + (s.n_rs_seq or 0))
    csa_layers, hca_layers = [i for i in range(n) if ratios[i] == CSA], [i for i in range(n) if ratios[i] == HCA]
    rows = []
    for ratio in ratios:
        k = k_type.row_bytes(width) * swa * streams
        state = 0
        if ratio:
            k += k_type.row_bytes(width) * cells[ratio] * streams
            state += 2 * f32.row_bytes((2 if ratio == CSA else 1) * width) * STATE_ROWS[ratio] * planes
        if ratio == CSA:
            k += k_type.row_bytes(index) * cells[CSA] * streams
            state += 2 * f32.row_bytes(2 * index) * STATE_ROWS[CSA] * planes
        rows.append((k, 0, state))

    def cache(name, n_layers, n_cells, row, **extra):
        k = k_type.row_bytes(row) * n_cells * streams * n_layers
        return dict(cache=name, cells=n_cells, streams=streams, cells_total=n_cells * streams, layers=n_layers,
                    seqs=s.n_seq, k_type=s.type_k, v_type=s.type_v, k_bytes=k, v_bytes=0, size_mib=printed_mib(k),
                    k_mib=printed_mib(k), v_mib=0.0, wrapper="dsv4", **extra)

    def state(name, ratio, layers, n_embd):
        size = 2 * f32.row_bytes(n_embd) * STATE_ROWS[ratio] * planes * layers
        return dict(cache="dsv4_state", name=name, ratio=ratio, state_size=STATE_ROWS[ratio], n_embd_state=n_embd,
                    streams=streams, rs_seq=s.n_rs_seq or 0, layers=layers, bytes=size, size_mib=printed_mib(size))

    caches = [cache("kv", 0, n_ctx_seq, width), cache("kv_swa", n, swa, width),
              cache("kv_csa", len(csa_layers), cells[CSA], width, comp_cells=max(1, cdiv(n_ctx_seq, CSA))),
              cache("kv_hca", len(hca_layers), cells[HCA], width, comp_cells=max(1, cdiv(n_ctx_seq, HCA))),
              cache("kv_lid", len(csa_layers), cells[CSA], index, comp_cells=max(1, cdiv(n_ctx_seq, CSA))),
              state("csa", CSA, len(csa_layers), 2 * width), state("hca", HCA, len(hca_layers), width),
              state("lid", CSA, len(csa_layers), 2 * index)]
    return caches, rows, swa


def dsv4_log_lines(caches: list, mib) -> list[str]:
    """The lines llama_kv_cache_dsv4's constructor prints (L1251-L1329 and the caches' own), in its order,
    without the per-buffer lines (their device names)."""
    by = {c["cache"] if c["cache"] != "dsv4_state" else c["name"]: c for c in caches}
    lines = ["llama_kv_cache_dsv4: creating DSV4 raw KV cache"]

    def size_line(c):
        return (f"llama_kv_cache: size = {mib(c['k_bytes']):7.2f} MiB ({c['cells']:6d} cells, {c['layers']:3d} layers, "
                f"{c['seqs']:2d}/{c['streams']} seqs), K ({c['k_type']}): {mib(c['k_bytes']):7.2f} MiB, "
                f"V ({c['v_type']}): {0.0:7.2f} MiB")

    lines.append(f"llama_kv_cache_iswa: creating non-SWA KV cache, size = {by['kv']['cells']} cells")
    lines.append(size_line(by["kv"]))
    lines.append(f"llama_kv_cache_iswa: creating     SWA KV cache, size = {by['kv_swa']['cells']} cells")
    lines.append(size_line(by["kv_swa"]))
    for key, what in (("kv_csa", "CSA compressed"), ("kv_hca", "HCA compressed"), ("kv_lid", "lightning-indexer")):
        lines.append(f"llama_kv_cache_dsv4: creating DSV4 {what} KV cache, size = {by[key]['comp_cells']} cells")
        lines.append(size_line(by[key]))
    for name, what in (("csa", "CSA"), ("hca", "HCA"), ("lid", "lightning-indexer")):
        c = by[name]
        lines.append(f"llama_kv_cache_dsv4: creating DSV4 {what} compressor state")
        lines.append(f"llama_dsv4_comp_state: {name} ratio = {c['ratio']}, state = {c['state_size']} x "
                     f"{c['n_embd_state']}, streams = {c['streams']}, rs_seq = {c['rs_seq']}, layers = {c['layers']}, "
                     f"size = {mib(c['bytes']):7.2f} MiB")
    return lines
