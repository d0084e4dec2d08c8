"""ui/cache.py: what one session computes is shown to another only for the same model (Model.fingerprint)."""

import pytest

import kvmem
from kvmem.catalog import preset

cache = pytest.importorskip("ui.cache")

AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}


def _pasted(**changes) -> kvmem.Model:
    """What the sidebar's "Paste JSON" makes of llama-3.1-8b's config.json (named as the app names a paste)."""
    return kvmem.Model.from_hf_config({**preset("llama-3.1-8b")["config"], **changes}, name="pasted config")


def test_two_sessions_whose_models_differ_only_in_quantization_each_see_their_own_grid():
    cache.fit_grid.clear()
    cache.sweep.clear()
    awq, plain = _pasted(quantization_config=AWQ), _pasted()     # same name, same layers
    # session A: AWQ 4-bit weights (5.73 GB); session B: the same config unquantised (16.06 GB bf16)
    grid_a = cache.fit_grid(awq, gpus=["h100-sxm-80gb"], contexts=[2048])
    grid_b = cache.fit_grid(plain, gpus=["h100-sxm-80gb"], contexts=[2048])
    assert (grid_a["max_batch"][0], grid_b["max_batch"][0]) == (257, 218)   # kvmem.fit's own, model by model
    cells_a = cache.sweep([awq], ["h100-sxm-80gb"], contexts=[2048])
    cells_b = cache.sweep([plain], ["h100-sxm-80gb"], contexts=[2048])
    assert (cells_a[0].max_batch, cells_b[0].max_batch) == (257, 218)
    # and the same model again is one entry: the first session's answer, not recomputed
    assert cache.fit_grid(_pasted(quantization_config=dict(AWQ)), gpus=["h100-sxm-80gb"],
                          contexts=[2048])["max_batch"][0] == 257


def test_two_app_sessions_pasting_configs_that_differ_only_in_quantization():
    """The issue's repro with two AppTest sessions on the Fit page: A pastes an AWQ config, B the
    same config without quantization_config; B was shown A's grid (max batch 247 at 2k on an H100)."""
    import json

    from tests.ui.apptest import load

    def session(config):
        at = load("ui/fit.py")
        at.run()
        at.radio(key="source").set_value("Paste JSON").run()
        at.text_area(key="pasted").set_value(json.dumps(config)).run()
        assert not at.exception
        grid = at.table[0].value
        row = grid[(grid["GPU"] == "h100-sxm-80gb") & (grid["Context (tokens)"] == 2048)]
        return int(row["Max batch"].iloc[0])

    config = preset("llama-3.1-8b")["config"]
    alone = []
    for pasted in ({**config, "quantization_config": AWQ}, config):   # each with the cache to itself
        cache.fit_grid.clear()
        alone.append(session(pasted))
    cache.fit_grid.clear()
    shared = [session({**config, "quantization_config": AWQ}), session(config)]   # one after the other
    assert shared == alone and alone[0] > alone[1]      # 4-bit weights leave more room: more sequences
