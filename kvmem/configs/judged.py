"""Fields the judge found without effect on the cache (kvmem.oracles.field_effects, run by
tools/field_effects.py over transformers 5.24.0; its output is tests/configs/field_effects_sweep.json):
for each family, fields its reader used to refuse that transformers' own model, changed and run, caches
the same bytes with. kvmem.configs.families adds them to the family's ``ignores`` with WHY. A field the
judge saw change the bytes (gemma3's use_bidirectional_attention, which halves the window; nemotron_h's
mamba_d_conv and mamba_n_groups) stays a refusal naming it, and so do the no-effect fields kvmem's own
SSM facts read under another family's spelling (n_groups, ssm_state_size, chunk_size,
mamba_chunk_size: kvmem.configs.build._facts takes the first one set, and vLLM's mode reads them there).
"""

__all__ = ["JUDGED", "WHY"]

WHY = ("transformers 5.24 caches the same bytes with it changed (kvmem.oracles.field_effects; "
       "tests/configs/field_effects_sweep.json)")

# kvmem family -> fields
JUDGED = {
    "bailing_hybrid": ("conv_kernel_size",),
    "bamba": ("conv_kernel_size", "time_step_rank"),
    "deepseek_v4": ("qk_nope_head_dim",),
    "exaone4": ("window_size",),
    "falcon_h1": ("conv_kernel_size",),
    "falcon_mamba": ("conv_kernel_size",),
    "gemma2": ("use_bidirectional_attention",),
    "gemma4_text": ("conv_kernel_size",),
    "granitemoehybrid": ("conv_kernel_size",),
    "jamba": ("conv_kernel_size", "time_step_rank"),
    "kimi_linear": ("conv_kernel_size", "short_conv_kernel_size"),
    "kolibri1": ("sliding_window_pattern",),
    "lara_mini": ("conv_kernel_size",),
    "lfm2": ("conv_kernel_size",),
    "lfm3": ("conv_kernel_size",),
    "mamba": ("conv_kernel_size",),
    "mamba2": ("conv_kernel_size",),
    "mpt": ("attn_type",),
    "muse_glimmer_text": ("window_size",),
    "muse_spark_text": ("conv_kernel_size", "window_size"),
    "nemotron_h": ("conv_kernel_size", "mamba_expand"),
    "olmo_hybrid": ("conv_kernel_size",),
    "qwen2": ("window_size",),
    "qwen2_5_vl_text": ("window_size",),
    "qwen3_5_moe_text": ("conv_kernel_size",),
    "qwen3_5_text": ("conv_kernel_size",),
    "qwen3_next": ("conv_kernel_size",),
    "zaya": ("conv_kernel_size",),
}
