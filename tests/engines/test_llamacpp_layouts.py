"""kvmem.engines.llamacpp.layouts.layout: the build's layer split."""

from kvmem.catalog import get_model
from kvmem.engines.llamacpp.layouts import layout
from kvmem.engines.llamacpp.placement import CPU
from kvmem.engines.llamacpp.tensors import synthesised_tensors


def test_layout_takes_the_builds_layer_split():
    """-ngl 32 on Llama-3.1-8B (32 layers): builds from PR #18148 (2025-12-18) offload the output layer
    first, so layer 0 stays on the host ("offloaded 32/33 layers"); earlier builds offload the 32
    repeating layers and keep the output on the host (also 32/33)."""
    model = get_model("llama-3.1-8b")
    tensors = synthesised_tensors(model, "q4_k_m")
    kw = {"gpus": ("CUDA0",), "n_gpu_layers": 32, "n_ctx": 4096}
    now = layout(model, tensors, **kw).placement
    old = layout(model, tensors, **kw, build="2025-11-01").placement
    assert now.layer_device[0] == CPU and now.layer_device[1:] == ("CUDA0",) * 31 and now.output_device == "CUDA0"
    assert old.layer_device == ("CUDA0",) * 32 and old.output_device == CPU
    assert now.offloaded_layers == old.offloaded_layers == 32
    # the output layer (output.weight Q6_K 4096 x 128256 = 430,833,664 B + output_norm, CUDA-padded)
    # and layer 0 trade places: the GPU's model buffers differ by output - layer 0
    assert now.device("CUDA0").model_bytes != old.device("CUDA0").model_bytes
