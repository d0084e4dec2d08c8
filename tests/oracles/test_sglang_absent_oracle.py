"""Config files that leave fields out, judged by SGLang 0.5.23's own ModelConfig (kvmem/oracles/sglang_absent.py):
each field kvmem reads left out of every sglang_families case (and Muse Spark, Beam, EXAONE) in turn; kvmem's SGLang layout
of the file against what SGLang's ModelConfig makes of the same file. About 15 s."""

import pytest

from tests.oracles.conftest import require

require("sglang")

from kvmem.oracles import sglang_absent as oracle  # noqa: E402

_ENCODERS = ("bert", "bert-generation", "camembert", "data2vec-text", "electra", "ernie", "roberta",
             "roberta-prelayernorm", "roc_bert", "xlm-roberta", "xlm-roberta-xl", "xmod")
# kvmem refuses, SGLang sizes: safe refusals, each with why
ACCEPTED = {
    # without is_decoder the class default is an encoder, which kvmem refuses (it caches nothing under transformers);
    # SGLang's Transformers backend runs it as a decoder anyway
    **{(t, "is_decoder"): "kvmem refuses an encoder config" for t in _ENCODERS},
    # KimiLinearConfig's default 32 layers past linear_attn_config's lists (configs/kimi_linear.py#L23)
    ("kimi-linear-48b-a3b", "num_hidden_layers"): "refused (own_configs.OWN_DEFAULTS)",
    ("kimi-k3", "num_hidden_layers"): "kvmem's reader: linear_attn_config names layers past the default 27",
    ("kimi-k3", "num_attention_heads"): "kvmem's reader: the default 32 heads do not divide into 96 KV heads",
    ("nemotron-h-8b", "hybrid_override_pattern"): "kvmem's reader refuses NemotronHConfig's 4-layer default",
    ("nemotron-h-8b", "num_hidden_layers"): "kvmem's reader needs the layer count beside the pattern",
    ("step3p5", "sliding_window"): "kvmem's reader: sliding layers without a window",
    ("mistral4", "v_head_dim"): "kvmem's SGLang mode refuses the Transformers backend's expanded MLA then",
}


@pytest.fixture(scope="module")
def sweep():
    return oracle.absent_fields()


def test_no_case_reads_a_left_out_field_otherwise_than_sglang(sweep):
    assert {r.outcome for r in sweep} <= set(oracle.SGLANG_OUTCOMES)
    found = {(r.model_type, r.field): (r.outcome, r.absent, r.filled) for r in sweep if r.outcome != "same"}
    new = {key: value for key, value in found.items() if key not in ACCEPTED}
    assert not new, "\n".join(f"{t} without {f}: {o}: kvmem {a} / SGLang {b}" for (t, f), (o, a, b) in new.items())
    assert {o for o, _, _ in found.values()} <= {"refused"}
    assert len(sweep) > 600 and len({r.model_type for r in sweep}) > 45


def test_the_fixed_findings_now_agree_with_sglang(sweep):
    # each was "wrong" or "engine-refuses" before kvmem.engines.sglang.own_configs: SGLang's own classes raise
    # (Qwen3NextConfig's full_attention_interval, NemotronHConfig's n_groups, Step3p5Config's layer_types, the
    # DSA index_head_dim, Kimi's MLA widths) or fill otherwise (Qwen3.5 2 KV heads, GraniteMoeHybrid's defaults,
    # LongCat's qk_rope_head_dim 128, DeepSeek-V3.2 without index_topk plain MLA, Muse Spark all full, EXAONE MHA)
    same = {(r.model_type, r.field) for r in sweep if r.outcome == "same"}
    assert {("qwen3-next-80b-a3b", "full_attention_interval"), ("qwen3.5-27b", "num_key_value_heads"),
            ("nemotron-h-8b", "n_groups"), ("step3p5", "layer_types"), ("deepseek-v3.2", "index_head_dim"),
            ("deepseek-v3.2", "index_topk"), ("kimi-linear-48b-a3b", "kv_lora_rank"),
            ("kimi-k3", "qk_rope_head_dim"), ("granitemoehybrid", "layer_types"),
            ("granitemoehybrid", "mamba_d_state"), ("granitemoehybrid", "num_key_value_heads"),
            ("granitemoehybrid", "hidden_size"), ("longcat_flash", "qk_rope_head_dim"),
            ("muse_spark", "layer_types"), ("mamba2", "head_dim"), ("exaone", "num_key_value_heads")} <= same


def test_muse_spark_with_sliding_layers_is_hybrid_swa_as_sglang_makes_it():
    # transformers' MuseSparkConfig defaults, MuseSparkForConditionalGeneration: 62 layers, full where
    # (61 - i) % 4 == 0 (16 full), the rest sliding; SGLang's ModelConfig: hybrid SWA with those two sets
    (name, muse), = [c for c in oracle.extra_cases() if c[0] == "muse_spark"]
    outcome, ours, theirs = oracle.judge_file(muse)
    assert outcome == "same", (ours, theirs)
    assert ours["full"] == list(range(1, 62, 4)) and len(ours["swa"]) == 46
