"""Layer and Model: what each kind needs, and the message that names what is missing."""

import dataclasses

import pytest

from kvmem import Layer, Model, RecurrentState
from kvmem.layer import Compressor

ONE_ROW = "a compressed layer caches one row shared by K and V: kv_heads 1, head_dim_k >= 1, head_dim_v 0"


@pytest.mark.parametrize("kwargs, message", [
    (dict(kind="dense"), "layer kind must be one of ('full', 'sliding', 'chunked', 'mla', 'linear', 'shared', "
                         "'none', 'compressed'), got 'dense'"),
    (dict(kind="sliding", kv_heads=8, head_dim_k=128, head_dim_v=128), "a sliding layer needs a positive window, got 0"),
    (dict(kind="chunked", kv_heads=8, head_dim_k=128, head_dim_v=128, window=-1),
     "a chunked layer needs a positive window, got -1"),
    (dict(kind="full", kv_heads=8, head_dim_k=128), "a full layer needs kv_heads, head_dim_k and head_dim_v >= 1"),
    (dict(kind="mla", qk_rope_head_dim=64), "an mla layer needs kv_lora_rank >= 1"),
    (dict(kind="shared"), "a shared layer needs shared_with (the layer whose cache it reads)"),
    (dict(kind="linear"), "a linear layer needs a recurrent state"),
    (dict(kind="compressed", kv_heads=1, head_dim_k=512), "a compressed layer needs a positive window, got 0"),
    (dict(kind="compressed", kv_heads=2, head_dim_k=512, window=128), ONE_ROW),
    (dict(kind="compressed", kv_heads=1, head_dim_k=512, head_dim_v=512, window=128), ONE_ROW),
    (dict(kind="sliding", kv_heads=1, head_dim_k=512, head_dim_v=512, window=128, compressor=Compressor(4, 512)),
     "only a compressed layer has a compressor, not a sliding layer"),
])
def test_layer_validation_names_what_is_missing(kwargs, message):
    with pytest.raises(ValueError) as refused:
        Layer(**kwargs)
    assert str(refused.value) == message


def test_layer_widths_and_held_tokens():
    full = Layer("full", kv_heads=8, head_dim_k=128, head_dim_v=64)
    assert (full.k_width, full.v_width, full.held_tokens(5000)) == (8 * 128, 8 * 64, 5000)
    sliding = Layer("sliding", kv_heads=8, head_dim_k=128, head_dim_v=128, window=4096)
    assert sliding.held_tokens(1000) == 1000 and sliding.held_tokens(5000) == 4096
    chunked = Layer("chunked", kv_heads=8, head_dim_k=128, head_dim_v=128, window=8192)
    assert chunked.held_tokens(10_000) == 8192        # a whole chunk, wherever the sequence is in it
    mla = Layer("mla", kv_lora_rank=512, qk_rope_head_dim=64)
    assert (mla.k_width, mla.v_width) == (576, 0)      # one latent, counted in K
    linear = Layer("linear", state=RecurrentState(conv_channels=10, conv_kernel=4, ssm_elements=100))
    assert linear.held_tokens(5000) == 0 and linear.state.elements() == 10 * 3 + 100


def test_model_needs_a_layer_and_is_frozen():
    with pytest.raises(ValueError, match="a model needs at least one layer"):
        Model(name="empty", layers=(), hidden_size=8, num_attention_heads=1)
    model = Model(name="m", layers=[Layer("full", kv_heads=1, head_dim_k=8, head_dim_v=8)], hidden_size=8,
                  num_attention_heads=1)
    assert isinstance(model.layers, tuple) and model.kinds == {"full": 1}
    with pytest.raises(dataclasses.FrozenInstanceError):
        model.name = "other"


def test_kinds_are_one_vocabulary_with_capabilities():
    from kvmem.layer import Kind
    assert [kind for kind in Kind if kind.per_head] == ["full", "sliding", "chunked"]
    assert [kind for kind in Kind if kind.windowed] == ["sliding", "chunked"]
    assert [kind for kind in Kind if kind.caches_tokens] == ["full", "sliding", "chunked", "mla", "compressed"]
    assert [kind for kind in Kind if kind.compressed] == ["compressed"]
    assert Kind.MLA.latent and Kind.LINEAR.has_state and not Kind.SHARED.caches_tokens
    layer = Layer("sliding", kv_heads=2, head_dim_k=8, head_dim_v=8, window=4)
    assert layer.kind is Kind.SLIDING and layer.kind == "sliding" and f"{layer.kind}" == "sliding"
    with pytest.raises(ValueError, match="layer kind must be one of"):
        Layer("hybrid")


def test_a_compressor_keeps_rows_buffers_and_overlap_as_deepseek_v4_does():
    # modeling_deepseek_v4.py DeepseekV4CSACache at compress rate 4, head_dim 512, indexer 128, t = 1,026:
    # floor(1026 / 4) = 256 rows of 512 + 128; 1026 mod 4 = 2 buffered tokens of 2 x 640 (Ca, Cb) in kv
    # and again in gate; a window has closed, so 4 x 640 of Ca kept in kv and in the (fp32) gate
    csa = Compressor(4, 512, 128, overlap=True)
    assert (csa.row_width, csa.buffer_width) == (640, 1280)
    assert (csa.compressed_rows(1026), csa.buffered_tokens(1026), csa.overlap_tokens(1026)) == (256, 2, 4)
    assert csa.state_elements(1026) == (2 * 2 * 1280 + 4 * 640, 4 * 640)
    assert csa.overlap_tokens(3) == 0                       # no window closed yet: no overlap state
    # DeepseekV4HCACache at 128: no indexer, no overlap; 1026 = 8 x 128 + 2
    hca = Compressor(128, 512)
    assert (hca.compressed_rows(1026), hca.state_elements(1026)) == (8, (2 * 2 * 512, 0))
    with pytest.raises(ValueError, match="a compressor needs rate and head_dim >= 1"):
        Compressor(0, 512)


def test_a_compressed_layer_holds_its_window_and_describes_its_compressor():
    layer = Layer("compressed", kv_heads=1, head_dim_k=512, window=128, compressor=Compressor(128, 512))
    assert (layer.k_width, layer.v_width, layer.held_tokens(1000), layer.held_tokens(100)) == (512, 0, 128, 100)
    assert layer.caches_tokens and not layer.kind.windowed and layer.kind.compressed
    model = Model("v4", (layer,), hidden_size=4096, num_attention_heads=64)
    assert "1 compressed (512-wide K=V rows, window 128, + 1 row per 128 tokens)" in model.describe()


def _llama_config(**changes) -> dict:
    from kvmem.catalog import preset
    return {**preset("llama-3.1-8b")["config"], **changes}


AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}


def test_models_that_differ_only_in_their_quantization_are_two_models():
    awq = Model.from_hf_config(_llama_config(quantization_config=AWQ), name="pasted config")
    plain = Model.from_hf_config(_llama_config(), name="pasted config")
    assert awq.layers == plain.layers and awq.name == plain.name
    assert awq != plain and awq.fingerprint != plain.fingerprint
    # and the numbers they give differ: 4-bit AWQ weights leave more room for the KV cache on an H100 at 2k
    import kvmem
    assert [kvmem.fit(m, gpu="h100-sxm-80gb", context=2048).max_batch for m in (awq, plain)] == [257, 218]


def test_the_same_model_read_twice_is_one_model_whatever_the_key_order():
    config = _llama_config(quantization_config=AWQ)
    again = dict(reversed(list(config.items())), quantization_config=dict(reversed(list(AWQ.items()))))
    one, two = Model.from_hf_config(config, name="m"), Model.from_hf_config(again, name="m")
    assert one == two and hash(one) == hash(two) and one.fingerprint == two.fingerprint
    assert dataclasses.replace(one, reading=None) == one        # how it was read changes no number


def test_facts_config_and_checkpoint_are_part_of_the_identity():
    from kvmem.facts import ModelFacts, MoeShape
    from kvmem.sources import Checkpoint, Tensor
    base = Model(name="m", layers=[Layer("full", kv_heads=1, head_dim_k=8, head_dim_v=8)], hidden_size=8,
                 num_attention_heads=1)
    moe = dataclasses.replace(base, facts=ModelFacts(moe=MoeShape(8, 2, 16, 0, 0)))
    vocab = dataclasses.replace(base, facts=ModelFacts(vocab_size=32000))
    rope = dataclasses.replace(base, config={"rope_scaling": {"factor": 8.0}})
    q4 = base.with_checkpoint(Checkpoint("gguf", "m.gguf", (Tensor("token_embd.weight", "Q4_K", (8, 256), 144),)))
    q6 = base.with_checkpoint(Checkpoint("gguf", "m.gguf", (Tensor("token_embd.weight", "Q6_K", (8, 256), 210),)))
    variants = [base, moe, vocab, rope, q4, q6]
    assert len({m.fingerprint for m in variants}) == len(variants)
    assert all(a != b for i, a in enumerate(variants) for b in variants[i + 1:])
    assert len(set(variants)) == len(variants)      # hashable, and no two equal


def test_from_hf_config_builds_the_model_from_the_readers_fields():
    from kvmem.configs import custom_config, model_fields
    cfg = custom_config(layers=2, heads=4, kv_heads=2, head_dim=64)
    m = Model.from_hf_config(cfg, hf_id="org/tiny", source="here")
    # no name given: the Hub id names it; 2 layers x 2 KV heads x (64 + 64) = 512 elements per token
    assert (m.name, m.hf_id, m.source, m.model_type) == ("org/tiny", "org/tiny", "here", "custom")
    assert sum(layer.k_width + layer.v_width for layer in m.layers) == 512
    assert m == Model(**model_fields(cfg, hf_id="org/tiny", source="here"))
    assert Model.from_hf_config(cfg).name == "custom"         # else the file's _name_or_path
