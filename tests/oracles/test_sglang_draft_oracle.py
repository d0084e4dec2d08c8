"""kvmem's SGLang EAGLE/MTP draft pool against SGLang 0.5.23's own DefaultPoolConfigurator
(kvmem/oracles/sglang_draft.py)."""

from tests.oracles.conftest import require

require("sglang")

from kvmem.oracles import sglang_draft as oracle  # noqa: E402


def test_draft_cells_and_tokens_equal_sglangs():
    cases = oracle.directed_cases()
    assert {c["model"].name for c in cases} >= {"llama-3.1-8b", "deepseek-v2-lite"}
    bad = [f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, SGLang {c.engine!r}"
           for case in cases for c in oracle.run_case(**case) if not c.matches]
    assert not bad, "\n".join(bad)


def test_capacity_with_speculative_options_equals_sglangs():
    # kvmem.capacity's tokens with --speculative-algorithm (the draft's layers from its config or the MTP layers)
    cases = oracle.capacity_cases()
    bad = [f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, SGLang {c.engine!r}"
           for case in cases for c in oracle.run_capacity_case(**case) if not c.matches]
    assert not bad, "\n".join(bad)


def test_sglang_parses_the_planned_speculative_flags():
    # the plan's command through SGLang 0.5.23's own parser (ServerArgs.add_cli_args): the draft as sized
    import argparse

    from sglang.srt.server_args import ServerArgs

    import kvmem
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    plan = kvmem.plan("deepseek-v3", gpu="h200-sxm-141gb", num_gpus=8, engine="sglang", context=32768,
                      speculative_algorithm="NEXTN", speculative_num_steps=3, speculative_eagle_topk=1,
                      speculative_num_draft_tokens=4)
    ns = parser.parse_args(plan.argv[3:])
    assert (ns.speculative_algorithm, ns.speculative_num_steps, ns.speculative_eagle_topk,
            ns.speculative_num_draft_tokens) == ("NEXTN", 3, 1, 4)
    assert ns.speculative_draft_model_path is None
    eagle = kvmem.plan("llama-3.1-8b", gpu="h100-sxm-80gb", engine="sglang", context=8192,
                       speculative_algorithm="EAGLE3", speculative_draft_model_path="llama-3.2-1b")
    ns = parser.parse_args(eagle.argv[3:])
    assert (ns.speculative_algorithm, ns.speculative_draft_model_path) == ("EAGLE3", "meta-llama/Llama-3.2-1B-Instruct")


def test_speculative_decoding_caps_the_requests_as_sglang_resolves_them():
    # NEXTN on deepseek-v3, 8 x H200 (143,771 MiB): SGLang resolves EAGLE, max_running_requests 48, the same
    # mem_fraction_static (0.897); kvmem's fit admits 48 at 4k (the pool holds far more)
    import kvmem
    spec = dict(speculative_algorithm="NEXTN", speculative_num_steps=3, speculative_eagle_topk=1,
                speculative_num_draft_tokens=4)
    theirs = oracle.resolved_speculative("deepseek-v3", gpu_mib=143_771, tp=8, **spec)
    fit = kvmem.fit("deepseek-v3", gpu="h200-sxm-141gb", num_gpus=8, engine="sglang", context=4096, **spec)
    defaults = kvmem.sizing.engine_defaults("sglang", "h200-sxm-141gb", context=4096, tp=8)
    assert (theirs["speculative_algorithm"], theirs["max_running_requests"]) == ("EAGLE", 48)
    assert theirs["mem_fraction_static"] == float(defaults.values["mem_fraction_static"]) == 0.897
    assert fit.capacity.details.max_running_requests == fit.max_batch == 48


def test_hybrid_swa_draft_equals_sglangs_configurator():
    cases = oracle.swa_capacity_cases()
    bad = [f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, SGLang {c.engine!r}"
           for case in cases for c in oracle.run_swa_capacity_case(**case) if not c.matches]
    assert not bad, "\n".join(bad)


def test_mamba_targets_own_mtp_head_is_sized_as_sglang_does():
    # SGLang's ServerArgs (verify width, 48 requests, extra_buffer), _resolve_eagle_aux_hidden_state,
    # _handle_max_mamba_cache with the verify states, DefaultPoolConfigurator, resolve_max_num_reqs and the draft
    # worker's one-layer MHATokenToKVPool (kvmem/oracles/sglang_mamba_draft.py): Qwen3-Next, Qwen3.5, Nemotron-H
    from kvmem.oracles import sglang_mamba_draft as mamba_oracle
    cases = mamba_oracle.cases()
    assert len(cases) == 7
    bad = [f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, SGLang {c.engine!r}"
           for name, cfg, setting in cases for c in mamba_oracle.run_case(name, cfg, **setting) if not c.matches]
    assert not bad, "\n".join(bad)


def test_dsa_targets_draft_cell_and_pool_are_sglangs():
    # DeepSeek-V3.2 / GLM-5 / GLM-5.2 (shared top-k layers) with their MTP layer: the cell's latent share and the draft's
    # indexer on every draft layer (pool_configurator.py), and the draft worker's DSATokenToKVPool built on the CPU
    cases = oracle.dsa_cases()
    bad = [f"{c.case}: {c.quantity}: kvmem {c.kvmem!r}, SGLang {c.engine!r}"
           for case in cases for c in oracle.run_dsa_case(**case) if not c.matches]
    assert not bad, "\n".join(bad)
