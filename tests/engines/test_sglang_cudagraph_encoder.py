"""What SGLang 0.5.23 holds back for a multimodal model's encoder (kvmem.engines.sglang.encoder): the vision
tower's factor on the default mem_fraction_static and the embedding cache out of the KV budget, in fit's numbers."""

import json
from fractions import Fraction
from pathlib import Path

import pytest

import kvmem
from kvmem.catalog import preset
from kvmem.engines.sglang.budget import model_defaults
from kvmem.engines.sglang.encoder import EMBEDDING_CACHE_BYTES, encoder_reserve, multimodal, vlm_factor
from kvmem.gpus import get_gpu

CONFIGS = Path(__file__).resolve().parent.parent / "fixtures" / "configs"
QWEN25_VL = CONFIGS / "new" / "qwen2.5-vl-7b-transformers-4.53.json"
QWEN3_VL = CONFIGS / "corpus" / "Qwen--Qwen3-VL-32B-Instruct.json"
MIB = 1 << 20


def _config(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_the_vision_factor_by_hand():
    # Qwen2.5-VL-7B: 32 layers x 1280: complexity 32 x 1280^2 / (24 x 1024^2) = 25/12;
    # 1 - 0.1 x (25/12 - 1) = 107/120; x 0.95 = 2033/2400 = 0.8470833...
    assert vlm_factor(32, 1280) == Fraction(2033, 2400)
    # Qwen3-VL-32B: 27 x 1152: complexity 1.423828125, factor 0.95 x 0.9576171875 = 0.909736328125
    assert vlm_factor(27, 1152) == Fraction(909736328125, 10 ** 12)
    # the clamp: a 2-layer tower is 0.95 x 1.05, a 100-layer x 2048 one 0.95 x 0.8
    assert vlm_factor(2, 512) == Fraction(95, 100) * Fraction(105, 100)
    assert vlm_factor(100, 2048) == Fraction(95, 100) * Fraction(8, 10)
    with pytest.raises(ValueError, match="vision_layers must be a positive integer, got 0"):
        vlm_factor(0, 1024)


def test_qwen25_vl_on_an_h100_as_sglang_resolves_it():
    # SGLang 0.5.23's own ServerArgs(...).resolve_once() on the CPU (kvmem/oracles/sglang_reserve.resolved,
    # gpu 81,559 MiB, tp 1) gives mem_fraction_static 0.7073145833333332 for this config: 0.835 x 2033/2400
    model = kvmem.Model.from_hf_config(QWEN25_VL)
    gpu = get_gpu("h100-sxm-80gb")
    mfs = model_defaults(model, gpu, 8192, 1, 1, {}, {}).values["mem_fraction_static"]
    assert mfs == Fraction(835, 1000) * Fraction(2033, 2400)
    assert abs(float(mfs) - 0.7073145833333332) < 1e-15
    # a fraction given is SGLang's as given: no factor (memory_hook.py#L281: only when it is None)
    given = model_defaults(model, gpu, 8192, 1, 1, {}, {"mem_fraction_static": Fraction(835, 1000)})
    assert given.values["mem_fraction_static"] == Fraction(835, 1000)


def test_qwen25_vl_fit_breakdown():
    # H100: CUDA total 85,061,827,297 B, free before the weights = that - 512 MiB (kvmem's non-torch);
    # KV pool = free x 0.835 x 2033/2400 - weights - 100 MiB (the embedding cache); the rest beside it is activations
    model = kvmem.Model.from_hf_config(QWEN25_VL)
    fit = kvmem.fit(model, gpu="h100-sxm-80gb", context="8k", batch=1, engine="sglang")
    b = fit.to_dict()["breakdown"]
    free = b["total"] - 512 * MIB
    mfs = Fraction(835, 1000) * Fraction(2033, 2400)
    assert b["kv_pool"] == free * mfs.numerator // mfs.denominator - b["weights"] - 100 * MIB == 45_539_638_434
    assert b["activations"] == free - b["weights"] - b["kv_pool"] == 24_844_079_679
    assert any("x 0.847083 for the vision tower (32 layers x 1280" in n for n in fit.notes)
    assert any("100 MiB out of the KV budget" in n for n in fit.notes)
    # the text model's 0.835: 56,332,242,709 B of pool; the vision tower takes 10.05 GiB (19%) of it
    text = kvmem.fit(model, gpu="h100-sxm-80gb", context="8k", batch=1, engine="sglang", mem_fraction_static=0.835)
    assert text.to_dict()["breakdown"]["kv_pool"] == 56_332_242_709


def test_qwen3_vl_on_a_large_hopper_warns_of_its_serving_defaults():
    # model_overrides/qwen3_vl.py: SM 9.0 and >= 60 GiB: no embedding cache, a CUDA-IPC feature pool kvmem leaves out
    config = _config(QWEN3_VL)
    hopper = encoder_reserve(config, hopper_60gib=True)
    assert hopper.factor == Fraction(909736328125, 10 ** 12) and hopper.embedding_cache_bytes == 0
    assert "Hopper GPU of 60 GiB or more" in hopper.warning
    l40s = encoder_reserve(config, hopper_60gib=False)
    assert l40s.embedding_cache_bytes == EMBEDDING_CACHE_BYTES == 104_857_600 and not l40s.warning


@pytest.mark.parametrize("name", ["gemma-3-27b", "llama-4-scout-17b-16e"])
def test_served_text_only_by_default(name):
    # configs/model_config.py#L692-L697: Gemma 3 and Llama 4 need --enable-multimodal; SGLang's resolution gives
    # them the text model's 0.835 on an 80 GB H100
    config = preset(name)["config"]
    assert "vision_config" in config and not multimodal(config) and encoder_reserve(config) is None


def test_a_tower_kvmem_does_not_read_is_a_warning():
    # Kimi-K3 (remote-code config): SGLang lowers its fraction by a tower kvmem cannot size; the fit says so
    reserve = encoder_reserve(preset("kimi-k3")["config"])
    assert reserve.factor is None and "kvmem reads the tower of Qwen2/2.5/3-VL, Qwen3.5 and Gemma 4 only" in \
        reserve.warning


@pytest.mark.parametrize("source, gpu, gpu_mib", [
    ("qwen2.5-vl", "h100-sxm-80gb", 81_559), ("qwen2.5-vl", "rtx-4090-24gb", 24_564),
    ("qwen3-vl", "l40s-48gb", 46_068), ("gemma-4-26b-a4b", "h100-sxm-80gb", 81_559),
    ("gemma-3-27b", "h100-sxm-80gb", 81_559),
])
def test_the_fraction_is_sglangs_own(source, gpu, gpu_mib):
    # judged by SGLang 0.5.23's ServerArgs resolution run on the CPU (.venv-oracles; skipped elsewhere)
    pytest.importorskip("sglang")
    from kvmem.oracles.sglang_reserve import resolved
    config = {"qwen2.5-vl": lambda: _config(QWEN25_VL), "qwen3-vl": lambda: _config(QWEN3_VL)}.get(
        source, lambda: preset(source)["config"])()
    theirs = resolved(config, gpu_mib=gpu_mib, tp=1)["mem_fraction_static"]
    ours = model_defaults(kvmem.Model.from_hf_config(config), get_gpu(gpu), 8192, 1, 1, {}, {})
    assert abs(float(ours.values["mem_fraction_static"]) - theirs) < 1e-12


RESERVING = ("[2026-12-06 00:00:00 TP0] Reserving {} GB of the KV budget for post-sizing multimodal allocations "
             "(feature-transport pools + embedding cache).")


def test_check_log_reads_the_multimodal_reservation():
    # kv_cache_configurator.py#L213-L218 prints reserved MiB / 1024 to two decimals: 100 / 1024 = 0.098 -> "0.10"
    from kvmem.logcheck import check_log
    vl = kvmem.Model.from_hf_config(QWEN25_VL)
    (found,) = check_log(RESERVING.format("0.10"), vl, engine="sglang").checks
    assert found.quantity == "multimodal reservation" and found.matches and found.kvmem == "0.10 GB"
    # 1.10 GB: the embedding cache and a 1 GiB CUDA-IPC feature pool (SGLANG_MM_FEATURE_CACHE_MB's 1,024 MiB)
    (other,) = check_log(RESERVING.format("1.10"), vl, engine="sglang").checks
    assert not other.matches and "feature-transport pool" in other.cause
    # Qwen3-VL's depends on the GPU (on a large Hopper: no cache, the 1 GiB CUDA-IPC feature pool, "1.00"): a note
    qwen3 = check_log(RESERVING.format("1.00"), kvmem.Model.from_hf_config(QWEN3_VL), engine="sglang")
    assert not qwen3.checks and any("depends on the GPU" in n for n in qwen3.notes)


def test_the_reservation_line_sglang_itself_prints(caplog):
    # SGLang 0.5.23's own mm_runtime_reservation_gb logs the line (.venv-oracles; skipped elsewhere)
    pytest.importorskip("sglang")
    import logging

    from kvmem.logcheck import check_log
    from kvmem.oracles.sglang_runtime import load
    load()
    from sglang.srt.mem_cache.kv_cache_configurator import mm_runtime_reservation_gb
    with caplog.at_level(logging.INFO):
        gb = mm_runtime_reservation_gb(is_multimodal=True, mm_feature_transport=None)
    assert gb == 100 / 1024 == EMBEDDING_CACHE_BYTES / (1 << 30)
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Reserving")]
    (found,) = check_log(line, kvmem.Model.from_hf_config(QWEN25_VL), engine="sglang").checks
    assert found.matches and found.logged == "0.10 GB"


def test_engine_defaults_and_plan_take_the_models_fraction():
    # kvmem.engine_defaults with model= gives the vision tower's factor (0.835 x 2033/2400), without it the text
    # model's 0.835; plan pins the model's, written exactly (repr of the float)
    model = kvmem.Model.from_hf_config(QWEN25_VL)
    text = kvmem.sizing.engine_defaults("sglang", "h100-sxm-80gb", context="8k")
    vlm = kvmem.sizing.engine_defaults("sglang", "h100-sxm-80gb", context="8k", model=model)
    assert text.values["mem_fraction_static"] == Fraction(835, 1000)
    assert vlm.values["mem_fraction_static"] == Fraction(835, 1000) * Fraction(2033, 2400)
    plan = kvmem.plan(model, gpu="h100-sxm-80gb", context="8k", engine="sglang")
    # the exact fraction rounded once (SGLang's own float product, 0.7073145833333332, is one ulp below)
    assert plan.argv[plan.argv.index("--mem-fraction-static") + 1] == "0.7073145833333333"
