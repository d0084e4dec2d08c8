"""Model.from_gguf against llama.cpp 0c1e57098 (llama-cpp-python 0.3.36, CPU) for the architectures
kvmem/sources/gguf_more.py maps: the header convert_hf_to_gguf would write for a small config
(kvmem.sources.gguf_converted, no tensors) is handed to llama.cpp's llama_model_init_from_user, which creates
every tensor its load_arch_tensors asks for (F32, in memory: include/llama.h L505-L512), and a context of
N_CTX cells; each "llama_kv_cache: size = ..." line it prints, and the sum of its "CPU KV buffer size" lines,
must be kvmem's for the model it reads from the same header (-fa off, swa_full off as llama-server).
The small configs are tests/sources/test_gguf_more.py's; OLMoE and dots1 keep one KV head per head, as their
published models do (llama.cpp's olmoe and dots1 graphs abort at reserve time on GQA shapes: ggml_can_repeat,
ggml_reshape_3d). 68 cases, 8-27 s on the shared 2-core machine."""

from tests.oracles.conftest import require

require("llama_cpp")

import ctypes  # noqa: E402
import re  # noqa: E402

import pytest  # noqa: E402

import kvmem  # noqa: E402
from kvmem.oracles.llamacpp_buffers import BUFFER_LINE, in_child, llama_lib  # noqa: E402
from kvmem.oracles.llamacpp_presets import _ggml  # noqa: E402
from kvmem.sources.gguf_converted import converted_metadata  # noqa: E402
from tests.sources.test_gguf_more import COMMON, EXAONE_3, preset_config, small_config, write_header  # noqa: E402

N_CTX = 4096
# each cache's size line, and DeepSeek-V4's compressor states (src/llama-kv-cache-dsv4.cpp)
_SIZE_LINES = ("llama_kv_cache: size =", "llama_dsv4_comp_state: csa", "llama_dsv4_comp_state: hca",
               "llama_dsv4_comp_state: lid")
VOCAB = 1000
# Chameleon's graph masks its image tokens by id (8,192 and up): llama.cpp's own test-llama-archs.cpp L156-L157
# builds it with 10,240 tokens
_VOCAB = {"chameleon": 10240}
# Llama 4's chunks are 8,192 tokens (llama4.cpp L14): a context past them tells the chunk's size
_N_CTX = {"llama-4": 16384}
_DSV4 = dict(num_hidden_layers=4, hidden_size=512, num_attention_heads=8, head_dim=64, qk_rope_head_dim=32,
             q_lora_rank=64, o_lora_rank=32, o_groups=8, n_routed_experts=4, num_experts_per_tok=2,
             moe_intermediate_size=256, index_n_heads=8, index_head_dim=64, num_hash_layers=0,
             compress_ratios=[0, 0, 4, 128, 0], num_nextn_predict_layers=1)
# Gemma 3n: llama.cpp caches 20 layers whatever the shape (gemma3n.cpp L7): 24 layers, 4 of them sharing
_GEMMA3N = dict(num_hidden_layers=24, num_kv_shared_layers=4, hidden_size=256, num_attention_heads=2,
                num_key_value_heads=1, head_dim=128, intermediate_size=[512] * 24, hidden_size_per_layer_input=32,
                vocab_size_per_layer_input=VOCAB, laurel_rank=16, sliding_window=512,
                activation_sparsity_pattern=[0.0] * 24,
                layer_types=["full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(24)])


def _config(case: str) -> dict:
    if case == "deepseek-v4":
        cfg = preset_config("deepseek-v4-flash")
        cfg.update(_DSV4)
    elif case == "llama-4":     # Scout's config at 8 layers: 6 chunked (8,192), 2 full
        cfg = preset_config("llama-4-scout-17b-16e")
        cfg["text_config"].update(num_hidden_layers=8, hidden_size=256, num_attention_heads=4, num_key_value_heads=2,
                                  head_dim=64, intermediate_size=256, intermediate_size_mlp=512, num_local_experts=4)
        cfg["text_config"]["vocab_size"] = VOCAB
    elif case == "nemotron-3-nano":      # 10 layers: 4 Mamba-2, 4 MoE, 2 attention
        cfg = preset_config("nemotron-3-nano-30b-a3b")
        cfg.update(num_hidden_layers=10, hybrid_override_pattern="MEM*EMEM*E", hidden_size=256, num_attention_heads=4,
                   num_key_value_heads=2, head_dim=64, mamba_num_heads=8, mamba_head_dim=32, n_groups=2,
                   ssm_state_size=32, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=128,
                   moe_shared_expert_intermediate_size=256)
    elif case == "kimi-linear":      # 8 layers: MLA at 4 and 8 (1-indexed), KDA elsewhere
        cfg = preset_config("kimi-linear-48b-a3b")
        cfg.update(num_hidden_layers=8, hidden_size=256, num_attention_heads=4, num_key_value_heads=4, head_dim=64,
                   kv_lora_rank=128, qk_nope_head_dim=32, qk_rope_head_dim=32, v_head_dim=32, num_experts=4,
                   num_experts_per_token=2, moe_intermediate_size=128,
                   linear_attn_config={"full_attn_layers": [4, 8], "kda_layers": [1, 2, 3, 5, 6, 7], "num_heads": 4,
                                       "head_dim": 64, "short_conv_kernel_size": 4})
    elif case == "minimax-m1":      # 8 layers: 7 lightning, the 8th full
        cfg = preset_config("minimax-m1")
        cfg.update(num_hidden_layers=8, hidden_size=256, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                   rotary_dim=32, num_local_experts=4, intermediate_size=256, attn_type_list=[0] * 7 + [1])
    elif case == "exaone-3":
        cfg = dict(EXAONE_3)
    elif case == "gemma-3n":
        cfg = preset_config("gemma-3n-e2b")
        cfg.update(_GEMMA3N)
    else:
        cfg = small_config(case.split("-")[0], **COMMON[case])
    cfg["vocab_size"] = _VOCAB.get(case, VOCAB)
    return cfg


def _printed(path: str, n_ctx: int = N_CTX, flash: bool = False) -> dict:
    """llama.cpp's cache lines for n_ctx cells (f16) of the model llama_model_init_from_user builds from the
    header at ``path`` (flash attention on where ``flash``: LLAMA_FLASH_ATTN_TYPE_ENABLED 1, include/llama.h)."""
    lib, lines, _ = llama_lib()
    base, init_params = _ggml()
    del lines[:]
    ctx = ctypes.c_void_p()
    gctx = base.gguf_init_from_file(path.encode(), init_params(True, ctypes.pointer(ctx)))
    leave = lib.llama_model_set_tensor_data_t(lambda _tensor, _user: None)     # the data is never read
    model = lib.llama_model_init_from_user(gctx, leave, None, lib.llama_model_default_params())
    if not model:
        raise RuntimeError("llama.cpp could not build the model:\n" + "".join(lines[-6:]))
    cparams = lib.llama_context_default_params()
    cparams.n_ctx, cparams.n_batch, cparams.n_ubatch, cparams.n_seq_max = n_ctx, n_ctx, 512, 1
    cparams.flash_attn_type = 1 if flash else 0
    cparams.swa_full = False
    context = lib.llama_init_from_model(model, cparams)
    if not context:
        raise RuntimeError("llama.cpp could not create the context:\n" + "".join(lines[-6:]))
    out = {"size": [], "KV": [], "RS": [], "recurrent": []}
    for line in "".join(lines).splitlines():
        if line.startswith(_SIZE_LINES):
            out["size"].append(line.strip())
        out["recurrent"] += _recurrent(line)
        m = RS_LINE.match(line.strip())
        if m:
            out["RS"].append(float(m.group(2)))
        m = BUFFER_LINE.match(line.strip())
        if m and m.group(2) == "KV":
            out["KV"].append(float(m.group(3)))
    return out


RS_LINE = re.compile(r"^\S+: +(\S+) RS buffer size = +([0-9.]+) MiB")
# llama_memory_recurrent's size line: MiB, cells, layers, R and S (the pinned build adds "rs_seq" and a P term,
# which kvmem's line does not print: the numbers are compared)
_RECURRENT = re.compile(r"^llama_memory_recurrent: size = +([0-9.]+) MiB \( +(\d+) cells, +(\d+) layers.*"
                        r"R \(\w+\): +([0-9.]+) MiB, S \(\w+\): +([0-9.]+) MiB")


def _recurrent(line: str) -> list:
    m = _RECURRENT.match(line.strip())
    return [m.groups()] if m else []


# exaone_moe-mtp left out: llama_model_init_from_user aborts on the MTP block's skipped tensors
# (src/llama-model-loader.cpp#L1329 GGML_ASSERT(buft != nullptr)); files with MTP layers are judged by
# test_gguf_arches_oracle.py, which loads them from disk
CASES = ["deepseek-v4", "gemma-3n", "llama-4", "nemotron-3-nano", "kimi-linear", "exaone-3", "minimax-m1", *sorted(c for c in COMMON if c != "exaone_moe-mtp")]


@pytest.mark.parametrize("case", CASES)
def test_llamacpp_kv_of_the_converted_header_equals_kvmem(case, tmp_path):
    arch, meta = converted_metadata(_config(case))
    meta[f"{arch}.vocab_size"] = _VOCAB.get(case, VOCAB)
    if case == "exaone-3":
        # exaone.cpp L4 requires the RMS epsilon; the pinned converter writes EXAONE 3.5's layer_norm_epsilon as
        # attention.layer_norm_epsilon only (conversion/base.py L1511-L1516), so its own file does not load: the
        # key added here so that llama.cpp loads it (the cache does not read it)
        meta["exaone.attention.layer_norm_rms_epsilon"] = 1e-5
    path = str(tmp_path / "m.gguf")
    write_header(path, arch, meta)
    back = kvmem.Model.from_gguf(path)
    n_ctx = _N_CTX.get(case, N_CTX)
    printed = in_child(_printed, path, n_ctx)
    est = kvmem.estimate(back, engine="llama.cpp", tokens=n_ctx, kv_dtype="f16", flash_attn="off")
    assert printed["size"] or printed["recurrent"], printed
    assert printed["size"] == [line for line in est.log_lines if line.startswith(_SIZE_LINES)]
    # one "CPU KV buffer size" line per cache, each rounded to 0.01 MiB; the recurrent state in "RS" lines
    assert abs(sum(printed["KV"]) - est.kv_bytes / 2**20) <= 0.005 * len(printed["KV"]), (printed, est.kv_bytes)
    if case != "deepseek-v4":      # its compressor states print their own lines (compared above), no RS buffer
        assert abs(sum(printed["RS"]) - est.state_bytes / 2**20) <= 0.005 * len(printed["RS"]), printed
    assert printed["recurrent"] == [g for line in est.log_lines for g in _recurrent(line)]
