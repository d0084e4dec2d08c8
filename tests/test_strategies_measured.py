"""Strategies checked against real caches built with torch on the CPU.

Eviction: small caches driven with torch tensors the way StreamingLLM (sink + recent),
H2O (accumulated attention, heavy hitters + recent) and SnapKV (observation-window vote
after prefill) keep them; the bytes their storages hold must equal kvmem's prediction at
every step while the sequence grows, and stay bounded. The no-eviction baseline is a
transformers DynamicCache. Quantisation: transformers QuantizedCache with the HQQ backend;
packed values + per-group scale and zero point + the full-precision residual must equal
kvmem.strategies.quantized_estimate.
"""

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import kvmem  # noqa: E402
from kvmem import Eviction, Layer, Model  # noqa: E402
from kvmem.strategies import quantized_estimate  # noqa: E402

BATCH, KV_HEADS, HEAD_DIM, LAYERS = 2, 2, 64, 2
DTYPE = torch.bfloat16
# kvmem's view of the same cache: 2 layers x 2 KV heads x 64 x 2 (K, V) x 2 B = 1,024 B per token
MODEL = Model(name="toy-2x2x64", layers=(Layer("full", kv_heads=KV_HEADS, head_dim_k=HEAD_DIM, head_dim_v=HEAD_DIM),)
              * LAYERS, hidden_size=4 * HEAD_DIM, num_attention_heads=4, dtype="bf16")


def storage_bytes(tensors) -> int:
    """Bytes of the distinct storages behind ``tensors`` (a view over a larger buffer counts the buffer)."""
    seen = {}
    for t in tensors:
        s = t.untyped_storage()
        seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values())


def predicted(tokens, eviction=None):
    return kvmem.estimate(MODEL, tokens=tokens, batch=BATCH, kv_dtype="bf16", eviction=eviction).kv_bytes


def new_kv(gen, n=1):
    shape = (BATCH, KV_HEADS, n, HEAD_DIM)
    return torch.randn(shape, generator=gen, dtype=DTYPE), torch.randn(shape, generator=gen, dtype=DTYPE)


def test_dynamic_cache_baseline_grows_with_every_token():
    cfg = transformers.LlamaConfig(num_hidden_layers=LAYERS, num_attention_heads=4, num_key_value_heads=KV_HEADS,
                                   hidden_size=4 * HEAD_DIM, head_dim=HEAD_DIM)
    cache, gen = transformers.DynamicCache(config=cfg), torch.Generator().manual_seed(0)
    for _step in range(1, 201):
        for layer in range(LAYERS):
            cache.update(*new_kv(gen), layer)
    held = [t for layer in cache.layers for t in (layer.keys, layer.values)]
    assert storage_bytes(held) == predicted(200) == 200 * BATCH * 1024


class StreamingCache:
    """StreamingLLM: keep the first ``sink`` and the last ``window`` tokens of every layer."""

    def __init__(self, sink, window):
        self.sink, self.window, self.k, self.v = sink, window, [None] * LAYERS, [None] * LAYERS

    def update(self, layer, k, v):
        for store, new in ((self.k, k), (self.v, v)):
            x = new if store[layer] is None else torch.cat([store[layer], new], dim=-2)
            if x.shape[-2] > self.sink + self.window:
                x = torch.cat([x[..., :self.sink, :], x[..., x.shape[-2] - self.window:, :]], dim=-2)
            store[layer] = x

    def tensors(self):
        return self.k + self.v


def test_streaming_cache_is_bounded_as_predicted():
    policy = Eviction("streaming", sink=4, window=60)
    cache, gen = StreamingCache(4, 60), torch.Generator().manual_seed(1)
    for step in range(1, 301):
        for layer in range(LAYERS):
            cache.update(layer, *new_kv(gen))
        assert storage_bytes(cache.tensors()) == predicted(step, policy)
    # 300 tokens, 64 kept: 64 x 2 sequences x 1,024 B = 131,072 B, against 614,400 B uncompressed
    assert storage_bytes(cache.tensors()) == 64 * BATCH * 1024 == predicted(300) * 64 // 300


class H2OCache:
    """H2O: ``budget`` tokens per layer and head = the ``recent`` newest + the heavy hitters with
    the largest attention accumulated over all decode steps so far."""

    def __init__(self, budget, recent):
        self.budget, self.recent = budget, recent
        self.k, self.v, self.score = [None] * LAYERS, [None] * LAYERS, [None] * LAYERS
        self.pos, self.seen = [None] * LAYERS, [0] * LAYERS  # original position of each kept token

    def step(self, layer, q, k, v):
        K = k if self.k[layer] is None else torch.cat([self.k[layer], k], dim=-2)
        V = v if self.v[layer] is None else torch.cat([self.v[layer], v], dim=-2)
        attn = torch.softmax((q.float() @ K.float().transpose(-1, -2)) / HEAD_DIM ** 0.5, dim=-1)[..., 0, :]
        old = self.score[layer]
        score = attn if old is None else torch.cat([old, torch.zeros_like(attn[..., :1])], dim=-1) + attn
        new_pos = torch.full((*attn.shape[:-1], 1), self.seen[layer])
        pos = new_pos if self.pos[layer] is None else torch.cat([self.pos[layer], new_pos], dim=-1)
        self.seen[layer] += 1
        n = K.shape[-2]
        if n > self.budget:
            heavy = self.budget - self.recent
            top = score[..., :n - self.recent].topk(heavy, dim=-1).indices.sort(dim=-1).values
            keep = torch.cat([top, torch.arange(n - self.recent, n).expand(*top.shape[:-1], self.recent)], dim=-1)
            index = keep.unsqueeze(-1).expand(-1, -1, -1, HEAD_DIM)
            K, V, score, pos = K.gather(-2, index), V.gather(-2, index), score.gather(-1, keep), pos.gather(-1, keep)
        self.k[layer], self.v[layer], self.score[layer], self.pos[layer] = K, V, score, pos

    def tensors(self):
        return self.k + self.v


def test_h2o_cache_is_bounded_as_predicted():
    policy = Eviction("h2o", budget=48, recent=16)
    cache, gen = H2OCache(48, 16), torch.Generator().manual_seed(2)
    for step in range(1, 121):
        for layer in range(LAYERS):
            q = torch.randn(BATCH, KV_HEADS, 1, HEAD_DIM, generator=gen, dtype=DTYPE)
            cache.step(layer, q, *new_kv(gen))
        assert storage_bytes(cache.tensors()) == predicted(step, policy)
    assert storage_bytes(cache.tensors()) == 48 * BATCH * 1024
    # the heavy hitters are chosen per head: the two heads keep different old tokens,
    # and every head keeps the 16 most recent (104..119)
    pos = cache.pos[0][0]
    assert not torch.equal(pos[0], pos[1])
    assert pos[:, -16:].tolist() == [list(range(104, 120))] * KV_HEADS


def snapkv_compress(K, V, q_window, budget):
    """SnapKV: the last len(q_window) prompt tokens vote (pooled attention) for the prefix tokens kept."""
    w = q_window.shape[-2]
    attn = torch.softmax((q_window.float() @ K[..., :-w, :].float().transpose(-1, -2)) / HEAD_DIM ** 0.5, dim=-1)
    votes = torch.nn.functional.max_pool1d(attn.sum(-2).flatten(0, 1).unsqueeze(1), 7, stride=1, padding=3)
    votes = votes.view(*attn.shape[:2], -1)
    top = votes.topk(budget - w, dim=-1).indices.sort(dim=-1).values
    index = top.unsqueeze(-1).expand(-1, -1, -1, HEAD_DIM)
    return (torch.cat([K[..., :-w, :].gather(-2, index), K[..., -w:, :]], dim=-2),
            torch.cat([V[..., :-w, :].gather(-2, index), V[..., -w:, :]], dim=-2))


def test_snapkv_compresses_the_prompt_then_grows():
    gen = torch.Generator().manual_seed(3)
    k_cache, v_cache = [], []
    for _layer in range(LAYERS):
        K, V = new_kv(gen, 300)
        q = torch.randn(BATCH, KV_HEADS, 16, HEAD_DIM, generator=gen, dtype=DTYPE)
        k, v = snapkv_compress(K, V, q, budget=64)
        k_cache.append(k)
        v_cache.append(v)
    assert storage_bytes(k_cache + v_cache) == predicted(300, Eviction("snapkv", budget=64, observation_window=16))
    for new in range(1, 41):
        for layer in range(LAYERS):
            k, v = new_kv(gen)
            k_cache[layer] = torch.cat([k_cache[layer], k], dim=-2)
            v_cache[layer] = torch.cat([v_cache[layer], v], dim=-2)
        policy = Eviction("snapkv", budget=64, observation_window=16, new_tokens=new)
        assert storage_bytes(k_cache + v_cache) == predicted(300 + new, policy) == (64 + new) * BATCH * 1024


@pytest.mark.parametrize("nbits", [4, 2])
def test_quantized_cache_bytes_equal_the_prediction(nbits):
    pytest.importorskip("hqq")
    cfg = transformers.LlamaConfig(num_hidden_layers=LAYERS, num_attention_heads=4, num_key_value_heads=KV_HEADS,
                                   hidden_size=4 * HEAD_DIM, head_dim=HEAD_DIM)
    cache = transformers.QuantizedCache("hqq", config=cfg, nbits=nbits, q_group_size=64, residual_length=16)
    gen = torch.Generator().manual_seed(4)
    for layer in range(LAYERS):
        cache.update(*new_kv(gen, 100), layer)  # the prefill is quantised whole

    def held():
        out = []
        for layer in cache.layers:
            for q, meta in (layer._quantized_keys, layer._quantized_values):
                out += [q, meta["scale"], meta["zero"]]
            if layer.keys.numel():
                out += [layer.keys, layer.values]
        return out

    # HQQ keeps one scale and one zero point per group of 64 in the cache's dtype (bf16 here);
    # 64 divides head_dim, so its flat groups and kvmem's per-row groups count the same
    fmt = kvmem.dtype(f"int{nbits}", group_size=64, scale_dtype="bf16", zero_point=True)
    for step in range(1, 16):  # 15 decoded tokens stay in the bf16 residual
        for layer in range(LAYERS):
            cache.update(*new_kv(gen), layer)
        expected = quantized_estimate(MODEL, tokens=100 + step, batch=BATCH, k_dtype=fmt, residual_length=step)
        assert storage_bytes(held()) == expected.kv_bytes
    for layer in range(LAYERS):  # the 16th fills the residual: everything is re-quantised
        cache.update(*new_kv(gen), layer)
    assert storage_bytes(held()) == quantized_estimate(MODEL, tokens=116, batch=BATCH, k_dtype=fmt).kv_bytes
    # a row of 64: 64 x nbits / 8 B packed + one group x (2 B scale + 2 B zero)
    assert quantized_estimate(MODEL, tokens=116, batch=BATCH, k_dtype=fmt).kv_bytes == (
        116 * BATCH * LAYERS * KV_HEADS * 2 * (64 * nbits // 8 + 4))
