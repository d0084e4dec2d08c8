"""Config files that leave fields out, judged by vLLM 0.33.0's own config classes (kvmem/oracles/vllm_absent.py):
each field kvmem reads left out of every vLLM-registered family kvmem reads, in turn; kvmem's vLLM mode on the file
against kvmem's vLLM mode on the config vLLM's class fills it in to. About 10 s."""

import pytest

from tests.oracles.conftest import require

require("vllm")

from kvmem.oracles import vllm_absent as oracle  # noqa: E402

# Left-out fields where the two readings differ on purpose: (model_type, field) -> why.
ACCEPTED = {
    # BeamConfig leaves head_dim None (configs/beam.py#L27) and vLLM's attention takes hidden_size // heads = 5,120 // 48
    # = 106 (models/beam/nvidia/attention.py#L66): kvmem's vLLM mode does so; the filled-in config (head_dim null) is
    # one kvmem's reader refuses, so the comparison reads "wrong"
    ("beam", "head_dim"): "vLLM's floor(hidden / heads), which kvmem's reader refuses as a config",
    # a safe refusal: MiniMaxM3Config fills sparse_attention_freq in ([0] * 3 + [1] * 57) while the file's layer
    # pattern (transformers' default) says otherwise
    ("minimax_m3_vl", "layer_types"): "refused: vLLM's sparse layers and kvmem's reading disagree",
    # a safe refusal: kvmem's reader needs the text config's hidden_size; ColQwen3Config fills it in
    ("colqwen3", "hidden_size"): "refused by kvmem's reader",
}


@pytest.fixture(scope="module")
def sweep():
    return oracle.absent_fields()


def test_no_vllm_family_reads_a_left_out_field_otherwise_than_vllms_own_class(sweep):
    assert {r.outcome for r in sweep} <= set(oracle.OUTCOMES)
    found = {(r.model_type, r.field): (r.outcome, r.absent, r.filled) for r in sweep if r.outcome != "same"}
    new = {key: value for key, value in found.items() if key not in ACCEPTED}
    assert not new, "\n".join(f"{t} without {f}: {o}: kvmem {a} / vLLM {b}" for (t, f), (o, a, b) in new.items())
    assert set(found) == set(ACCEPTED)
    # the families vLLM reads with its own class and kvmem reads: 20 of them, 277 left-out fields
    assert {"beam", "hy_v4", "kimi_linear", "minimax_m3_vl", "step3p5", "deepseek_v32"} <= {r.model_type for r in sweep}
    assert len(sweep) > 250


def test_the_fixed_findings_now_agree_with_vllms_class(sweep):
    # Beam without sliding_window / num_key_value_heads: vLLM's BeamConfig fills 4,096 and 4 (configs/beam.py#L26,
    # #L32); Kimi-Linear without kv_lora_rank, qk_rope_head_dim or num_hidden_layers: refused, as vLLM's class leaves
    # them None / 32 (configs/kimi_linear.py#L18, #L43-L45)
    same = {(r.model_type, r.field) for r in sweep if r.outcome == "same"}
    assert {("beam", "sliding_window"), ("beam", "num_key_value_heads"), ("beam", "num_hidden_layers"),
            ("kimi_linear", "kv_lora_rank"), ("kimi_linear", "qk_rope_head_dim"),
            ("kimi_linear", "num_hidden_layers")} <= same


def test_leave_out_drops_the_field_from_the_text_part():
    d = {"model_type": "minimax_m3_vl", "text_config": {"layer_types": ["full_attention"], "hidden_size": 8}}
    file = oracle.leave_out(d, "layer_types")
    assert file["text_config"] == {"hidden_size": 8} and d["text_config"]["layer_types"] == ["full_attention"]
