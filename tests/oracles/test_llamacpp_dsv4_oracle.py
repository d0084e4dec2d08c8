"""kvmem's llama.cpp DeepSeek-V4 caches (kvmem/engines/llamacpp/dsv4.py) against llama.cpp 0c1e57098 itself:
a sparse deepseek4 GGUF loaded by llama-cpp-python 0.3.36, every line llama_kv_cache_dsv4 prints compared
(kvmem/oracles/llamacpp_dsv4.py)."""

import pytest

from tests.oracles.conftest import require

require("llama_cpp")

from kvmem.oracles import llamacpp_dsv4 as oracle  # noqa: E402


def _agrees(name, model, setting):
    checks = oracle.run_case(name, model, setting)
    bad = [c for c in checks if not c.matches]
    assert not bad, "\n".join(f"{c.case}: {c.quantity}:\n kvmem {c.kvmem!r}\n llama.cpp {c.engine!r}" for c in bad)
    return checks


@pytest.mark.parametrize("case", oracle.directed_cases(), ids=lambda case: case[0])
def test_deepseek_v4_flash(case):
    checks = _agrees(*case)
    assert [c.quantity for c in checks] == ["refuses", "cache lines"]


def test_flash_lines_at_8k():
    name, model, setting = oracle.directed_cases()[0]
    lines = {c.quantity: c.engine for c in _agrees(name, model, setting)}["cache lines"]
    # the SWA half: GGML_PAD(min(8,192, 128 + 512), 256) = 768 cells of 43 layers x 512 x 2 B = 32.25 MiB
    assert lines[4] == ("llama_kv_cache: size =   32.25 MiB (   768 cells,  43 layers,  1/1 seqs), "
                        "K (f16):   32.25 MiB, V (f16):    0.00 MiB")
    assert len(lines) == 17


@pytest.mark.parametrize("seed", range(12))
def test_seeded_random_configs(seed):
    _agrees(*oracle.random_case(seed))


@pytest.mark.parametrize("case", oracle.aborting_cases(), ids=lambda case: case[0])
def test_where_llama_cpp_aborts_kvmem_refuses(case):
    name, model, setting = case
    checks = oracle.run_case(name, model, setting)
    assert checks[0].engine == "llama.cpp aborted (exit code -8)"      # SIGFPE in llama_init_from_model
    assert "aborts (SIGFPE) creating the context" in oracle._kvmem_side(model, setting)[1]


def test_validate_draws_deepseek_v4():
    # kvmem validate --engine llama.cpp: the families in turn, DeepSeek-V4 among them, judged the same way
    from kvmem.oracles import llamacpp
    cases = llamacpp.random_cases(2 * len(llamacpp.FAMILIES), 3)
    mine = [case for case in cases if case[1].model_type == "deepseek_v4"]
    assert len(mine) == 2
    for case in mine:
        _agrees(*case)
        assert [c.quantity for c in llamacpp.run_case(*case)] == ["refuses", "cache lines"]


# The layout (kvmem/engines/llamacpp/graphs_dsv4.py) at full shape: llama-quantize's dry run over the converter's
# source (F16 weights, F32 norms / 1-D / routers, I32 tid2eid, MXFP4 experts kept by --tensor-type, as the
# published files keep them) types every tensor as kvmem does, and llama.cpp loads exactly kvmem's tensor list
# (no_alloc: every tensor deepseek4.cpp load_arch_tensors asks for, no other) with llama_model_size kvmem's sum.
@pytest.mark.parametrize("preset", ["deepseek-v4-flash", "deepseek-v4-pro"])
def test_dsv4_layout_types_and_size_equal_llamacpp(preset, tmp_path):
    import kvmem
    from kvmem.dtypes import GGML_TYPES
    from kvmem.engines.llamacpp.tensors import GPT_OSS_EXPERTS
    from kvmem.oracles.llamacpp_buffers import in_child
    from tests.oracles.test_llamacpp_layout_families_oracle import _dry_runs, _load

    model = kvmem.get_model(preset)
    source, path = str(tmp_path / "source.gguf"), str(tmp_path / "model.gguf")
    oracle.write_dsv4_layout(model, "q4_k_m", source, source=True)
    keep = tuple((pattern, GGML_TYPES[ggml].id) for pattern, ggml in GPT_OSS_EXPERTS)
    theirs = in_child(_dry_runs, source, ["q4_k_m", "q2_k"], keep)
    for fmt in ("q4_k_m", "q2_k"):
        tensors = oracle.write_dsv4_layout(model, fmt, path)
        assert {t.name: t.dtype for t in tensors} == theirs[fmt], fmt
        assert in_child(_load, path, True)["size"] == sum(t.nbytes for t in tensors), fmt
