"""Counting the cache's tensors: the unique storages it holds at the end.

``count_storages`` deduplicates by ``untyped_storage().data_ptr()``; a view over a larger buffer
(a sliding layer's last window - 1 tokens) counts the whole buffer. quanto's QTensors are
flattened into their plain tensors. The total must equal the estimate's K + V + recurrent
state to the byte.
"""

from __future__ import annotations


def _leaves(obj):
    """Plain tensors inside a cache entry: tensors, quanto QTensors (flattened), tuples, dicts."""
    import torch
    if obj is None:
        return
    if isinstance(obj, torch.Tensor):
        if hasattr(obj, "__tensor_flatten__") and type(obj) is not torch.Tensor:
            names, _ = obj.__tensor_flatten__()
            for name in names:
                yield from _leaves(getattr(obj, name))
        else:
            yield obj
    elif isinstance(obj, (tuple, list)):
        for item in obj:
            yield from _leaves(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _leaves(item)


def _layer_tensors(layer):
    for name in ("keys", "values", "indexer_keys", "_quantized_keys", "_quantized_values",
                 "conv_states", "recurrent_states"):
        yield from _leaves(getattr(layer, name, None))


def storage_sizes(layers, device) -> list[list[int]]:
    """Per layer, the byte sizes of the unique non-empty storages the cache holds there (a
    storage shared with an earlier layer is counted in the first)."""
    seen = set()
    per_layer = []
    for layer in layers:
        sizes = []
        tensors = layer if isinstance(layer, list) else _layer_tensors(layer)
        for t in tensors:
            storage = t.untyped_storage()
            key = (str(t.device), storage.data_ptr())
            if storage.nbytes() == 0 or key in seen:
                continue
            if t.device.type != device.type:
                raise RuntimeError(f"a cache tensor is on {t.device}, not on {device}")
            seen.add(key)
            sizes.append(storage.nbytes())
        per_layer.append(sizes)
    return per_layer


def count_storages(layers, device) -> tuple[int, int, tuple[int, ...]]:
    """(unique storage bytes, storage count, bytes per layer) of the tensors the cache holds."""
    sizes = storage_sizes(layers, device)
    per_layer = tuple(sum(layer) for layer in sizes)
    return sum(per_layer), sum(len(layer) for layer in sizes), per_layer
