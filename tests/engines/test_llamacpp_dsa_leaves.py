"""Why scheduled.reduced_layers cuts no glm-dsa / deepseek32 graph: a device's compute buffer is not a fixed
amount plus one zero-row leaf a layer (graphs_dsa._sparse_mask; ggml-alloc allocates every leaf before the first
node), so a cut graph plus the leaves it left out is not the whole graph."""

from dataclasses import replace

import kvmem
from kvmem.engines.llamacpp import scheduled
from kvmem.engines.llamacpp.compute import graph_shape

MiB = 1 << 20


def _one_gpu(n_layer: int) -> tuple:
    shape = graph_shape(kvmem.get_model("glm-5"))
    shape = replace(shape, n_layer=n_layer, indexer_full=shape.indexer_full[:n_layer])
    assert scheduled.reduced_layers(shape, (0,) * (n_layer + 1))[0] is shape       # never cut
    return scheduled.gpu_graph_bytes(shape, layer_gpu=(0,) * (n_layer + 1), n_gpus=1, n_kv=65536, n_ubatch=2048,
                                     flash_attn=False, n_outputs=1, fa_f16=True)


def test_a_dsa_buffer_is_not_one_leaf_a_layer_over_a_fixed_amount():
    # GLM-5's widths on one GPU, 65,536 cells, n_ubatch 2,048, flash attention off, one output row. A layer's leaf:
    # top-k 2,048 x 2,048 tokens x 4 B = 16 MiB (a multiple of CUDA's 128-byte alignment). 20 layers: 34,864.10 MiB
    # + 20 x 16 MiB; 21 and 22 layers: 35,200.10 MiB + 16 MiB a layer: the 21st layer adds 352 MiB, not 16 (the
    # room the freed leaves leave is taken by later layers' tensors, differently as it grows)
    leaf = 2048 * 2048 * 4
    sizes = [_one_gpu(n)[0] for n in (20, 21, 22)]
    assert [(b - n * leaf) / MiB for b, n in zip(sizes, (20, 21, 22), strict=True)] == [
        34864.1016845703125, 35200.1016845703125, 35200.1016845703125]
    assert sizes[1] - sizes[0] == 352 * MiB and sizes[2] - sizes[1] == leaf
