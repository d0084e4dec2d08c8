"""Every engine mode on every preset: a number, or a ValueError that says why — never a crash."""

import pytest

import kvmem
from kvmem.engines import ENGINES


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("name", kvmem.list_models())
def test_estimate_or_clear_refusal(name, engine):
    try:
        result = kvmem.estimate(name, engine=engine, tokens=4096, batch=2)
    except ValueError as exc:
        assert str(exc)
        return
    model = kvmem.get_model(name)
    assert result.kv_bytes > 0 or model.count("linear") == model.num_layers
    assert result.total_bytes == result.kv_bytes + result.state_bytes
    assert result.to_dict()["kv_bytes"] == result.kv_bytes
    assert len(result.per_layer) >= model.num_layers  # draft/MTP layers may follow the model's own
    assert result.kv_bytes_all_devices >= result.kv_bytes
