"""vLLM 0.33.0's Transformers backend as the judge of kvmem's vllm refusals of the families it would run that way
(kvmem/engines/vllm/__init__.py REFUSALS: Inkling-2, Inkling-2-Loop, HY-V4-VL).

For each config, in a fresh interpreter (vLLM's process group and the stand-ins below are process-wide), vLLM's
own code goes as far as it goes: EngineArgs.create_model_config reads the config from a folder and resolves the
architecture through the registry (registry.py _try_resolve_transformers); the class it names is built under a
VllmConfig on the CPU device (transformers/base.py: the transformers model on meta, recursive_replace, an Attention
per layer from _create_attention_instances), each attention layer is asked for its KV-cache spec, and one forward
of four tokens is run, as vLLM's startup profile run does (v1/worker/gpu_worker.py determine_available_memory).
The result: the backend class, the specs, and the forward's error (type, message, and the model-file frame that
raised it), which kvmem's refusal must name.

Stand-ins, in the judge only, none of them on the path that fails:
- ModelConfig._supports_multimodal_inputs returns False: it loads the checkpoint's HF processor (no processor
  files here; transformers' image processors import torchvision, which is not installed) only to decide whether
  image inputs are enabled. torchvision is never imported.
- The fused-MoE factory builds nn.Identity: its kernel pick needs a GPU platform; every failure comes before
  the first MoE block runs (Inkling-2's mlp_input precedes its MLP; HY-V4-VL fails inside attention).
- get_attn_backend returns the CPU backend and Attention.forward returns zeros of its output shape: vLLM's
  kernels need CUDA and a scheduled batch; a spec reads only the layer's constructor arguments, and Inkling-2's
  block residual fails after its layer's attention returned (a kernel returns the same shape).
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import traceback

__all__ = ["WRAPPERS", "TEXT_ONLY", "base_config", "random_config", "text_only", "judge", "kvmem_refusal"]

# kvmem model_type -> the wrapper model_type its published checkpoints use and their architecture
WRAPPERS = {"inkling2_text": ("inkling2", "Inkling2ForConditionalGeneration"),
            "inkling2_loop_text": ("inkling2_loop", "Inkling2LoopForConditionalGeneration"),
            "hy_v4_vl_text": ("hy_v4_vl", "HYV4VLForConditionalGeneration")}
# the text-only architecture transformers 5.24 has for the text config (HY-V4-VL has none)
TEXT_ONLY = {"inkling2_text": "Inkling2ForCausalLM", "inkling2_loop_text": "Inkling2LoopForCausalLM"}


def base_config(model_type: str) -> dict:
    """The wrapper config class's defaults (transformers 5.24), shrunk by kvmem.oracles.transformers.shrink,
    with the checkpoint's architecture and bfloat16."""
    from .transformers import default_config, shrink
    wrapper, arch = WRAPPERS[model_type]
    return dict(shrink(default_config(wrapper)).to_dict(), architectures=[arch], dtype="bfloat16")


def text_only(cfg: dict) -> dict:
    """A wrapper config's text config alone, as a text-only checkpoint (TEXT_ONLY's architecture) carries it."""
    text = cfg["text_config"]
    return dict(text, architectures=[TEXT_ONLY[text["model_type"]]], dtype=cfg["dtype"])


def random_config(model_type: str, seed: int) -> dict:
    """A seeded variation of base_config: layers, heads, KV heads and head widths, the layer pattern (Inkling-2's
    hybrid / hybrid_sliding, its loop bounds; HY-V4-VL's indexer sharing), validated by the config class."""
    from transformers import AutoConfig
    rng = random.Random(seed)
    d = base_config(model_type)
    text = d["text_config"]
    if model_type == "hy_v4_vl_text":
        n = rng.choice([2, 3, 5])
        heads = rng.choice([2, 4, 8])
        text.update(num_hidden_layers=n, num_attention_heads=heads, num_key_value_heads=heads,
                    kv_lora_rank=rng.choice([16, 32, 64]), qk_nope_head_dim=rng.choice([8, 16, 32]),
                    v_head_dim=rng.choice([8, 16, 32]),
                    indexer_types=["full"] + [rng.choice(["full", "shared"]) for _ in range(n - 1)],
                    mlp_layer_types=["dense"] + ["sparse"] * (n - 1), layer_types=["indexed_attention"] * n)
    else:
        block = rng.choice([2, 3])
        n = block * rng.choice([2, 3])
        kv, swa_kv = rng.choice([1, 2]), rng.choice([1, 2])
        text.update(num_hidden_layers=n, n_layers_per_attn_res_block=block, num_key_value_heads=kv,
                    num_attention_heads=kv * rng.choice([1, 2]), head_dim=rng.choice([16, 32]),
                    swa_num_key_value_heads=swa_kv, swa_num_attention_heads=swa_kv * rng.choice([1, 2]),
                    swa_head_dim=rng.choice([16, 32]), sliding_window_size=rng.choice([4, 8, 16]),
                    layer_types=[rng.choice(["hybrid", "hybrid_sliding"]) for _ in range(n)])
        if model_type == "inkling2_loop_text":
            text.pop("loop_config", None)
            start = block * rng.randint(1, n // block - 1)
            text.update(loop_layer_index_start=start, loop_layer_index_end=rng.choice(range(start, n + 1, block)),
                        loop_num_passes=rng.choice([2, 3]))
    AutoConfig.for_model(**{k: v for k, v in d.items() if k != "architectures"})   # the class accepts it
    return d


def kvmem_refusal(cfg: dict) -> str:
    """kvmem's vllm refusal of the config (kvmem.errors.EngineRefusal's reason); raises if kvmem sizes it."""
    import kvmem
    from kvmem.errors import EngineRefusal
    try:
        kvmem.estimate(kvmem.Model.from_hf_config(cfg), engine="vllm", tokens=1024)
    except EngineRefusal as refused:
        return refused.reason
    raise AssertionError("kvmem sizes it in vllm mode")


def judge(configs: list[dict], *, timeout_s: int = 300) -> list[dict]:
    """vLLM's verdict on each config, from one child interpreter (see the module's docstring)."""
    with tempfile.TemporaryDirectory() as root:
        folders = []
        for i, cfg in enumerate(configs):
            folder = os.path.join(root, f"case{i}")
            os.makedirs(folder)
            with open(os.path.join(folder, "config.json"), "w") as out:
                json.dump(cfg, out)
            folders.append(folder)
        env = dict(os.environ, VLLM_LOGGING_LEVEL="ERROR")
        done = subprocess.run([sys.executable, "-m", "kvmem.oracles.vllm_transformers", *folders], env=env,
                              capture_output=True, text=True, timeout=timeout_s)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or len(lines) != len(configs):
        raise RuntimeError(f"the vLLM judge failed (exit {done.returncode}): {done.stderr[-3000:]}")
    return [json.loads(line) for line in lines]


def _stand_ins():
    import torch
    import vllm.config.model as model_config
    import vllm.model_executor.layers.attention.attention as attention
    import vllm.model_executor.layers.attention.encoder_only_attention as encoder_only
    import vllm.model_executor.models.transformers.moe as moe
    from vllm.model_executor.layers.attention import Attention
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend
    model_config.ModelConfig._supports_multimodal_inputs = lambda _self: False
    moe.FusedMoEFactory = lambda **_kwargs: torch.nn.Identity()
    attention.get_attn_backend = lambda *_args, **_kwargs: CPUAttentionBackend
    encoder_only.get_attn_backend = attention.get_attn_backend
    Attention.forward = lambda self, query, _key, _value, **_kwargs: torch.zeros(
        query.shape[0], self.num_heads * self.head_size_v, dtype=query.dtype)


def _raised_in(error: BaseException) -> str:
    """The innermost transformers model-file frame of the error: 'modeling_x.py Class.function'."""
    where = ""
    for frame, _ in traceback.walk_tb(error.__traceback__):
        path = frame.f_code.co_filename
        if f"{os.sep}transformers{os.sep}models{os.sep}" in path:
            owner = frame.f_locals.get("self")
            where = f"{os.path.basename(path)} {type(owner).__name__ + '.' if owner is not None else ''}" \
                    f"{frame.f_code.co_name}"
    return where


def _one(folder: str) -> dict:
    import torch
    from vllm.config import (
        CacheConfig,
        DeviceConfig,
        ParallelConfig,
        SchedulerConfig,
        VllmConfig,
        set_current_vllm_config,
    )
    from vllm.engine.arg_utils import EngineArgs
    from vllm.forward_context import set_forward_context
    from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase
    from vllm.model_executor.model_loader.utils import get_model_architecture
    model_config = EngineArgs(model=folder, skip_tokenizer_init=True, load_format="dummy", enforce_eager=True,
                              max_model_len=256).create_model_config()
    config = VllmConfig(model_config=model_config, device_config=DeviceConfig(device="cpu"),
                        cache_config=CacheConfig(block_size=16), parallel_config=ParallelConfig(),
                        scheduler_config=SchedulerConfig(max_model_len=256, max_num_batched_tokens=256,
                                                         is_encoder_decoder=False))
    torch.set_default_dtype(model_config.dtype)
    with set_current_vllm_config(config):
        cls, arch = get_model_architecture(model_config)
        model = cls(vllm_config=config, prefix="")
        specs = {name: [type(module).__name__] + ([] if spec is None else [
                     type(spec).__name__, spec.num_kv_heads, spec.head_size, spec.sliding_window])
                 for name, module in model.named_modules() if isinstance(module, AttentionLayerBase)
                 for spec in [module.get_kv_cache_spec(config)]}
        model.to(model_config.dtype)
        mrope = getattr(model_config, "uses_mrope", False)
        positions = torch.arange(4).expand(3, -1) if mrope else torch.arange(4)
        error = None
        try:
            with set_forward_context(None, config):
                model(input_ids=torch.tensor([3, 4, 5, 6]), positions=positions)
        except Exception as raised:  # noqa: BLE001 -- the verdict is the error itself
            error = raised
    return {"architecture": arch, "specs": specs,
            "error": None if error is None else f"{type(error).__name__}: {error}",
            "raised_in": None if error is None else _raised_in(error)}


def _main(folders: list[str]) -> None:
    from vllm.config import DeviceConfig, VllmConfig, set_current_vllm_config
    from vllm.distributed import init_distributed_environment, initialize_model_parallel
    _stand_ins()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with set_current_vllm_config(VllmConfig(device_config=DeviceConfig(device="cpu"))):
        init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo",
                                     distributed_init_method=f"tcp://127.0.0.1:{port}")
        initialize_model_parallel(1, 1)
    for folder in folders:
        print(json.dumps(_one(folder)), flush=True)


if __name__ == "__main__":
    _main(sys.argv[1:])
