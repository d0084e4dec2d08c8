"""n_rs_seq against llama.cpp 0c1e57098 itself (llama-cpp-python 0.3.36, CPU-only; kvmem/engines/llamacpp/rs_seq.py
kept_rs_seq): an architecture without recurrent rollback (qwen3next) prints its RS buffer at n_rs_seq 0 whatever was
asked, and one with it (qwen35moe) builds its context at -ub <= n_rs_seq + 1 and then aborts at the first decode,
where kvmem refuses. Random hybrid cases 0 and 4 of kvmem.oracles.llamacpp_graphs_more; a few seconds."""

from tests.oracles.conftest import require

require("llama_cpp")

import random  # noqa: E402

import pytest  # noqa: E402

import kvmem  # noqa: E402
from kvmem.oracles.llamacpp_buffers import _GGML, BUFFER_LINE, in_child, llama_lib  # noqa: E402
from kvmem.oracles.llamacpp_family_files import write_family  # noqa: E402
from kvmem.oracles.llamacpp_graphs_more import random_delta_case  # noqa: E402


def _run(path, ctx, decode):
    """The buffers llama.cpp prints for ``ctx`` and, with ``decode``, the return of a two-token llama_decode."""
    lib, lines, _ = llama_lib()
    del lines[:]
    model = lib.llama_model_load_from_file(path.encode(), lib.llama_model_default_params())
    cparams = lib.llama_context_default_params()
    cparams.n_ctx, cparams.n_batch, cparams.n_ubatch = ctx["n_ctx"], ctx["n_ctx"], ctx["n_ubatch"]
    cparams.n_seq_max, cparams.n_rs_seq, cparams.kv_unified = ctx["n_seq"], ctx["n_rs_seq"], ctx["kv_unified"]
    cparams.type_k, cparams.type_v = _GGML[ctx["type_k"]], _GGML[ctx["type_v"]]
    cparams.flash_attn_type = ctx["flash_attn"]
    context = lib.llama_init_from_model(model, cparams)
    out = {}
    for line in "".join(lines).splitlines():
        m = BUFFER_LINE.match(line.strip())
        if m:
            out[f"{m.group(1)} {m.group(2)}"] = float(m.group(3))
        elif "RS buffer size" in line:
            out["RS"] = float(line.split("=")[1].split()[0])
    if decode:
        import faulthandler
        faulthandler.disable()      # the abort is expected: no Python traceback from the child
        tokens = (lib.llama_token * 2)(1, 2)
        out["decode"] = lib.llama_decode(context, lib.llama_batch_get_one(tokens, 2))
    return out


def _case(seed, tmp_path):
    model, fmt, ctx = random_delta_case(seed)
    n_rs_seq = random.Random(f"graphs-rs/{seed}").randint(1, 16)
    path = str(tmp_path / f"model{seed}.gguf")
    write_family(model, fmt, path, source=False)
    kw = dict(tokens=1, n_ctx=ctx["n_ctx"], n_seq=ctx["n_seq"], kv_unified=ctx["kv_unified"], type_k=ctx["type_k"],
              type_v=ctx["type_v"], flash_attn=bool(ctx["flash_attn"]), n_batch=ctx["n_ctx"], n_rs_seq=n_rs_seq)
    return model, path, dict(ctx, n_rs_seq=n_rs_seq), kw


def test_no_rollback_architecture_prints_its_rs_buffer_at_no_snapshots(tmp_path):
    model, path, ctx, kw = _case(0, tmp_path)
    printed = in_child(_run, path, ctx, True)
    d = kvmem.estimate(model, engine="llama.cpp", n_ubatch=ctx["n_ubatch"], **kw).details
    rs = [c for c in d.caches if c["cache"] == "recurrent"][0]
    assert (ctx["n_rs_seq"], d.n_rs_seq, printed["decode"]) == (10, 0, 0)
    assert rs["size_mib"] == printed["RS"] == 0.41


@pytest.mark.parametrize("n_ubatch", [7, 11, 12])
def test_a_micro_batch_below_the_snapshots_aborts_at_decode_and_is_refused(n_ubatch, tmp_path):
    model, path, ctx, kw = _case(4, tmp_path)
    ctx = dict(ctx, n_ubatch=n_ubatch)
    assert printed_or_abort(path, ctx) == ("abort" if n_ubatch <= ctx["n_rs_seq"] + 1 else "ok")
    if n_ubatch <= ctx["n_rs_seq"] + 1:
        with pytest.raises(ValueError, match="GGML_ASSERT"):
            kvmem.estimate(model, engine="llama.cpp", n_ubatch=n_ubatch, **kw)
    else:
        assert kvmem.estimate(model, engine="llama.cpp", n_ubatch=n_ubatch, **kw).details.n_ubatch == n_ubatch


def printed_or_abort(path, ctx):
    assert "CPU compute" in in_child(_run, path, ctx, False)     # the context builds at any -ub
    try:
        return "ok" if in_child(_run, path, ctx, True)["decode"] == 0 else "failed"
    except RuntimeError as error:       # GGML_ASSERT(n_ubatch > n_keep_tail): abort, exit code -6
        assert "exit code -6" in str(error)
        return "abort"
