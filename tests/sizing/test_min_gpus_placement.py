"""Fewest GPUs under llama.cpp is the placement's, as the verdict is (review finding 8)."""

import kvmem


def test_one_card_that_fits_is_the_fewest():
    # DeepSeek-V3.2 Q4_K_M at 8k on one RTX 3090: kvmem's placement runs it (experts in host RAM, host RAM not
    # bounded), so the fewest GPUs is 1 (was 21: the cards that hold every layer)
    r = kvmem.fit("deepseek-v3.2", gpu="rtx-3090", context="8k", engine="llama.cpp", weight_dtype="q4_k_m")
    assert (r.fits, r.min_gpus) == (True, 1)


def test_every_layer_on_one_card_is_one():
    # Gemma-3-27B Q4_K_M + an 858 MB projector at 79,872 tokens on a 3090: the placement keeps 63/63 layers on it
    r = kvmem.fit("gemma-3-27b", gpu="rtx-3090", context=79872, engine="llama.cpp", weight_dtype="q4_k_m",
                  mmproj=858_000_000)
    assert (r.fits, r.min_gpus, r.placement["offloaded_layers"]) == (True, 1, 63)


def test_host_bound_makes_it_more_cards():
    # Llama-3.1-70B Q4_K_M at 8k with 8 GiB of host RAM: one 3090 leaves too much on the host, two run it
    r = kvmem.fit("llama-3.1-70b", gpu="rtx-3090", context="8k", engine="llama.cpp", weight_dtype="q4_k_m",
                  host_memory_bytes=8 << 30)
    two = kvmem.fit("llama-3.1-70b", gpu="rtx-3090", num_gpus=2, context="8k", engine="llama.cpp",
                    weight_dtype="q4_k_m", host_memory_bytes=8 << 30)
    assert (r.fits, r.min_gpus, two.fits) == (False, 2, True)
