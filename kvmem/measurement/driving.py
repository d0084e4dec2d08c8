"""Driving a cache as a forward pass does: one prefill, then one decode token per step.

Layer by layer, ``cache.update`` with K/V of the layer's real per-token shapes
(kvmem.measurement.plans), plus ``update_conv_state`` / ``update_recurrent_state`` for
linear-attention layers and ``update_indexer`` for DeepSeek-V3.2; the toy engine's [K, V]
lists grow by ``torch.cat``. The incoming K/V of each step are views of one buffer allocated
before the measurement starts, so the step's own activations are not counted (the estimate
does not count them either).
"""

from __future__ import annotations


class Inputs:
    """Views of one buffer allocated before the measurement starts: the steps' K/V."""

    def __init__(self, compute, state):
        self.compute, self.state = compute, state

    def view(self, offset: int, shape: tuple, *, fp32: bool = False):
        buf = self.state if fp32 else self.compute
        n = 1
        for size in shape:
            n *= size
        return buf[offset:offset + n].view(shape), offset + n


def drive(cache, plans, inputs: Inputs, *, batch: int, prompt: int, steps: int, toy: bool) -> None:
    """One prefill of ``prompt`` tokens, then ``steps`` decode tokens, every layer in order."""
    import torch
    for j in range(steps + 1):
        s = prompt if j == 0 else 1
        for i, p in enumerate(plans):
            if p.kind == "dummy":
                continue
            if p.kind == "linear":
                if j == 0:
                    conv, _ = inputs.view(0, (batch, p.conv[0], s))
                    out = cache.update_conv_state(conv, i, conv_kernel_size=p.conv[1])
                    del out
                recurrent, _ = inputs.view(0, (batch, *p.recurrent), fp32=True)
                out = cache.update_recurrent_state(recurrent, i)
                del out
                continue
            k, offset = inputs.view(0, (batch, p.k_shape[0], s, p.k_shape[1]))
            v, offset = inputs.view(offset, (batch, p.v_shape[0], s, p.v_shape[1]))
            if toy:
                cache[i][0] = torch.cat([cache[i][0], k], dim=2)
                cache[i][1] = torch.cat([cache[i][1], v], dim=2)
            else:
                out = cache.update(k, v, i)
                del out
            if p.index_dim:
                index, _ = inputs.view(offset, (batch, s, p.index_dim))
                out = cache.update_indexer(index, i)
                del out
            del k, v

