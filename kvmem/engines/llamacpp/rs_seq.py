"""n_rs_seq, the recurrent rollback snapshots per sequence (llama_context_params.n_rs_seq, 2026 builds), as
llama_context keeps it (settings.resolve_settings)."""

from __future__ import annotations

from ...model import Model
from .tensors_kimi import KIMI, kimi_arch

# llm_arch_supports_rs_rollback (llama.cpp@0c1e57098 src/llama-arch.cpp#L1123-L1140) by the config's model_type, as the
# converter names the architecture: Qwen3_5* -> qwen35 / qwen35moe (conversion/qwen.py#L652-L661), DeepseekV4 ->
# deepseek4 (conversion/deepseek.py#L525-L528), NemotronH -> nemotron_h / nemotron_h_moe
# (conversion/nemotron.py#L198-L225), Lfm2 / Lfm2Moe -> lfm2 / lfm2moe (conversion/lfm2.py#L15-L100). The list's
# glm5-next, qwen4exp and bailingmoe3 keep snapshots too; kvmem reads no config of theirs.
RS_ROLLBACK_TYPES = frozenset({"qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "deepseek_v4",
                               "deepseek_ref", "nemotron_h", "lfm2", "lfm2_moe"})
# and by the llama.cpp architecture where one model_type converts to two: a KimiK3 config reads as its kimi_linear
# text_config, its architecture kimi-k3 (tensors_kimi.kimi_arch; conversion/kimi_k3.py#L30), which keeps the snapshots
# (src/llama-arch.cpp#L1125) where kimi-linear does not
RS_ROLLBACK_ARCHS = frozenset({"kimi-k3"})


def _keeps_snapshots(model: Model) -> bool:
    if model.model_type in RS_ROLLBACK_TYPES:
        return True
    return model.model_type in KIMI and kimi_arch(model) in RS_ROLLBACK_ARCHS


def kept_rs_seq(model: Model, n_rs_seq: int, n_ubatch: int) -> int:
    """n_rs_seq as llama_context keeps it, 0 for an architecture without recurrent rollback (qwen3next, mamba,
    jamba, ...: "requested but model does not support recurrent partial rollback; clamping to 0",
    llama.cpp@0c1e57098 src/llama-context.cpp#L105-L110). Kept, it makes every split of a batch hold the trailing
    n_rs_seq + 1 tokens of a sequence together: llama_batch_allocr::split_equal asserts n_ubatch > n_rs_seq + 1
    (src/llama-batch.cpp#L640-L641, n_keep_tail from src/llama-memory-hybrid.cpp#L84-L89,
    src/llama-memory-recurrent.cpp#L443-L445, src/llama-kv-cache-dsv4.cpp#L1412-L1413). Nothing checks it sooner:
    the context builds and prints its buffers at the n_ubatch given, then the first decode (llama-server's warm-up)
    aborts (llama.cpp run here: seed 4 of the random hybrid cases, -ub 7 and n_rs_seq 10, prints a 0.48 MiB compute
    buffer, then "GGML_ASSERT(n_ubatch > n_keep_tail) failed"). kvmem refuses that for -ub / -b as given
    (``n_ubatch``: the smaller); a context shorter than n_rs_seq + 2 cells caps n_ubatch likewise
    (src/llama-context.cpp#L246-L248) and is laid out with a note (plan), the searches probing such contexts."""
    if not _keeps_snapshots(model):
        return 0
    if n_rs_seq and n_ubatch <= n_rs_seq + 1:
        raise ValueError(f"n_rs_seq={n_rs_seq} with n_ubatch={n_ubatch} (min of -ub and -b): llama.cpp builds the "
                         f"context, then its first decode aborts with GGML_ASSERT(n_ubatch > n_keep_tail) "
                         f"(src/llama-batch.cpp: the trailing n_rs_seq + 1 = {n_rs_seq + 1} tokens of a sequence must "
                         f"share a micro-batch); give n_ubatch (-ub) >= {n_rs_seq + 2}")
    return n_rs_seq
