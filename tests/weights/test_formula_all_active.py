"""Weights from the parameter count when every routed expert is active (top_k == experts; review finding 6)."""

import kvmem
from kvmem.cli import main
from kvmem.weights import weights

# Mixtral's fields at a small shape with every expert routed to (top_k 8 of 8): total - active is then only the
# untied lm_head, and the experts cannot be scaled up from it (was ZeroDivisionError)
MIXTRAL_ALL = {"model_type": "mixtral", "architectures": ["MixtralForCausalLM"], "num_hidden_layers": 8,
               "hidden_size": 256, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
               "head_dim": 64, "vocab_size": 1000, "max_position_embeddings": 8192, "num_local_experts": 8,
               "num_experts_per_tok": 8, "tie_word_embeddings": False, "rms_norm_eps": 1e-5, "rope_theta": 1e4}
# transformers' HYV3Config at a small shape: 8 experts of width 128, num_experts_per_tok 8 (its default)
HY_V3 = {"model_type": "hy_v3", "architectures": ["HYV3ForCausalLM"], "num_hidden_layers": 8, "hidden_size": 256,
         "intermediate_size": 512, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
         "vocab_size": 1000, "max_position_embeddings": 8192, "num_experts": 8, "num_experts_per_tok": 8,
         "moe_intermediate_size": 128, "tie_word_embeddings": False, "rms_norm_eps": 1e-5, "rope_theta": 1e4}


def test_every_expert_active_counts_experts_from_their_shape():
    model = kvmem.Model.from_hf_config(MIXTRAL_ALL, name="mx")
    # experts: 8 layers x 8 experts x 3 (w1, w2, w3) x 256 x 128 = 6,291,456 parameters;
    # embedding 1,000 x 256 = 256,000 and an untied lm_head of as many; dense = 8,397,056 - 512,000 - 6,291,456
    # = 1,593,600 (attention 8 x 196,608, routers 8 x 2,048, norms 8 x 512, final norm 256)
    assert (model.params_total, model.params_active) == (8_397_056, 8_141_056)
    w = weights(model, "bf16")
    assert (w.embedding_bytes, w.lm_head_bytes, w.expert_bytes, w.dense_bytes) == \
        (512_000, 512_000, 2 * 6_291_456, 2 * 1_593_600)


def test_fit_of_an_all_active_gguf_header_does_not_crash(tmp_path, capsys):
    # was ZeroDivisionError (exit 70) at formula.py: (experts - top_k) == 0; now the fit is sized and llama.cpp's
    # placement refuses the family by name (exit 2, the refusal)
    from kvmem.sources.gguf_converted import converted_metadata
    from tests.sources.test_gguf_more import write_header
    write_header(tmp_path / "m.gguf", *converted_metadata(HY_V3))
    code = main(["fit", str(tmp_path / "m.gguf"), "--engine", "llama.cpp", "--weight-dtype", "q4_k_m",
                 "--gpu", "rtx-3090", "--context", "8k"])
    err = capsys.readouterr().err
    assert code == 2 and "'hy_v3' is not one of them" in err and "give the GGUF file itself" in err
