"""Fit hardware page (AppTest): the metrics equal kvmem.fit, refusals are messages."""

import pytest

import kvmem
from tests.ui.apptest import load, run


@pytest.fixture
def page():
    return run("ui/fit.py")


def metrics(at):
    return {m.label: m.value for m in at.metric}


def test_defaults_equal_library_fit(page):
    assert not page.exception
    expected = kvmem.fit("llama-3.1-8b", gpu="h100-sxm-80gb", context=8192, batch=1, kv_dtype="bf16")
    assert metrics(page)["Max batch"] == f"{expected.max_batch:,}"
    assert metrics(page)["Max context"] == f"{expected.max_context:,}"
    assert metrics(page)["Decode bound at batch 1"] == f"{expected.decode_tokens_per_s:,.1f} tok/s"
    assert len(page.table[0].value) == 4 * len(set(page.table[0].value["Context (tokens)"]))


def test_seventy_b_on_two_h100_in_fp8(page):
    page.selectbox(key="model").set_value("llama-3.3-70b")
    page.text_input(key="tokens").set_value("32k")
    page.number_input(key="batch").set_value(16)
    page.number_input(key="num_gpus").set_value(2)
    page.number_input(key="tp").set_value(2)
    page.selectbox(key="kv_dtype").set_value("fp8")
    page.selectbox(key="weight_dtype").set_value("fp8")
    page.run()
    expected = kvmem.fit("llama-3.3-70b", gpu="h100-sxm-80gb", num_gpus=2, tp=2, context="32k", batch=16,
                         kv_dtype="fp8", weight_dtype="fp8")
    assert not page.exception
    assert metrics(page)["Max batch"] == f"{expected.max_batch:,}"
    # one message for a batch that does not fit, as for one sequence (Fit.why_not): the shortfall, what would fit
    assert expected.fits is False and [e.value for e in page.error] == [expected.why_not]
    assert "short by" in expected.why_not and "What would fit: " in expected.why_not


def test_model_too_big_is_a_message(page):
    page.selectbox(key="model").set_value("deepseek-v3")
    page.selectbox(key="gpu").set_value("rtx-3060-12gb")
    page.run()
    assert not page.exception and page.error
    assert "does not fit" in page.error[0].value or "short" in page.error[0].value


def test_the_options_panel_shows_the_device_defaults_in_force(monkeypatch):
    # the library's hook (kvmem.sizing.engine_defaults) names the values in force on this GPU and why
    from types import SimpleNamespace

    from kvmem import sizing
    from tests.ui.apptest import load

    calls = []

    def engine_defaults(engine, gpu, *, context, tp=1, pp=1, **options):
        calls.append((engine, gpu, context, tp, pp, options))
        return SimpleNamespace(values={"max_num_batched_tokens": 2048, "max_num_seqs": 256},
                               reason="a100-sxm-80gb is an A100: the 70 GiB step does not apply")

    monkeypatch.setattr(sizing, "engine_defaults", engine_defaults, raising=False)
    at = load("ui/fit.py")
    at.query_params.update({"gpu": "a100-sxm-80gb", "tokens": "32k"})
    at.run()
    assert not at.exception
    assert ("vllm", "a100-sxm-80gb", 32768, 1, 1) in [call[:5] for call in calls]   # the heatmap asks too
    assert any("In force here: max_num_batched_tokens = 2,048, max_num_seqs = 256 (a100-sxm-80gb is an A100"
               in c.value for c in at.caption)


def test_not_fitting_names_the_reserve_and_suggests_raising_the_budget():
    # Llama-3.3-70B bf16 on 2 x A100 80 GB at 32k: 3.98 GiB left for 5.00 GiB of KV at 0.9;
    # at gpu_memory_utilization 0.95 one sequence fits (issue 14 item 7)
    from tests.ui.apptest import load

    at = load("ui/fit.py")
    at.query_params.update({"model": "llama-3.3-70b", "gpu": "a100-sxm-80gb", "num_gpus": "2", "tokens": "32k"})
    at.run()
    assert not at.exception
    assert kvmem.fit("llama-3.3-70b", gpu="a100-sxm-80gb", num_gpus=2, context="32k", batch=1,
                     gpu_memory_utilization=0.95).fits
    # the shortfall and what would fit said once, in the refusal (issue 33 finding 3: the page said them twice)
    assert [e.value for e in at.error if "short by" in e.value] == [at.error[0].value]
    assert "What would fit: gpu_memory_utilization=0.95 (max batch 1)" in at.error[0].value
    assert not [m.value for m in at.markdown if m.value.startswith("- would fit")] and not at.warning
    assert [i.value for i in at.info if i.value.startswith("No command")] == [
        "No command: the workload does not fit (the shortfall and what would fit are above)."]
    legend = [trace["name"] for trace in __import__("json").loads(at.get("plotly_chart")[0].proto.spec)["data"]]
    assert "reserve outside vLLM's budget (1 − gpu_memory_utilization)" in legend and "free" not in legend


def test_the_gpu_grid_is_sized_a_view_at_a_time(monkeypatch):
    """Under llama.cpp each grid cell is a placement over GPU and host (Kimi-K3's 30 cells took 19 s, holding the
    server): a view sizes the first GPU's row, then cells for KVMEM_VIEW_SECONDS (0: a cell a press)."""
    monkeypatch.setenv("KVMEM_VIEW_SECONDS", "0")
    at = load("ui/fit.py")
    at.query_params.update({"model": "qwen3-8b", "gpu": "rtx-4090-24gb", "engine": "llama.cpp",
                            "fit_gpus": ["rtx-4090-24gb", "rtx-3060-12gb"]})
    at.run()
    assert not at.exception
    grid = at.table[-1].value
    contexts = sorted(set(grid["Context (tokens)"]))
    assert set(grid["GPU"]) == {"rtx-4090-24gb"} and len(contexts) >= 4
    said = [i.value for i in at.info if i.value.startswith("Sized ")]
    assert said == [f"Sized 1 of 2 GPUs ({len(contexts)} of {2 * len(contexts)} cells). One view sizes new cells for "
                    "at most 0 s (KVMEM_VIEW_SECONDS), so that one page never holds the server for long."]
    for _ in contexts:
        at.button(key="fit_grid_next").click().run()
    assert not at.exception and not [i for i in at.info if i.value.startswith("Sized ")]
    grid = at.table[-1].value
    assert list(grid["GPU"]) == ["rtx-4090-24gb"] * len(contexts) + ["rtx-3060-12gb"] * len(contexts)
    fit = kvmem.fit("qwen3-8b", gpu="rtx-3060-12gb", context=int(contexts[-1]), engine="llama.cpp")
    assert grid.iloc[-1]["Max batch"] == fit.max_batch > 0


def test_a_bigger_card_holding_fewer_sequences_under_llama_cpp_is_explained():
    """DeepSeek-R1 at 8k under llama.cpp: an L4 24 GB holds 1 sequence, a T4 16 GB 5. Each card's max batch is what
    its placement of one sequence holds, and the L4's keeps more layers on its GPU: the page says so, with both
    placements' flags (the cells' own kvmem.fit), not a bare inversion."""
    fits = {gpu: kvmem.fit("deepseek-r1", gpu=gpu, context=8192, engine="llama.cpp") for gpu in ("l4-24gb", "t4-16gb")}
    assert fits["l4-24gb"].max_batch < fits["t4-16gb"].max_batch
    assert fits["l4-24gb"].placement["host_bytes"] < fits["t4-16gb"].placement["host_bytes"]
    at = load("ui/fit.py")
    at.query_params.update({"model": "deepseek-r1", "gpu": "l4-24gb", "engine": "llama.cpp",
                            "fit_gpus": ["l4-24gb", "t4-16gb"]})
    at.run()
    assert not at.exception
    said = [i.value for i in at.info if "holds fewer sequences" in i.value]
    flags = {gpu: " ".join(f.placement["flags"]) for gpu, f in fits.items()}
    gap = fits["t4-16gb"].placement["host_bytes"] - fits["l4-24gb"].placement["host_bytes"]
    assert said == [f"l4-24gb has as much memory as t4-16gb or more but holds fewer sequences at 8,192 tokens "
                    f"({fits['l4-24gb'].max_batch:,} vs {fits['t4-16gb'].max_batch:,}): under llama.cpp the max batch "
                    f"is what the placement of one sequence holds; l4-24gb's ({flags['l4-24gb']}) keeps "
                    f"{kvmem.format_bytes(gap)} less in host RAM than t4-16gb's ({flags['t4-16gb']}), so more of the "
                    "model is on its GPU and less room is left for more sequences' KV. For more sequences on l4-24gb, "
                    "give it fewer layers (type such flags under Your llama-server flags)."]
