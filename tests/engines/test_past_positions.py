"""engines.base.past_positions: what each engine does with a context past max_position_embeddings, and the
models whose positions are a learned table (no setting runs a position past it)."""

from kvmem import estimate


def test_a_learned_position_table_refuses_past_its_rows_on_every_engine():
    # gpt2: 1,024 learned positions (n_positions); token 1,024 has no row in wpe / position_embd
    for engine in ("llama.cpp", "vllm"):
        est = estimate("gpt2", engine=engine, tokens=2048)
        assert "learned table of 1,024 rows" in est.engine_refuses
        assert est.engine_allows_with is None       # VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 would not make it run
    assert estimate("gpt2", engine="llama.cpp", tokens=1024).engine_refuses is None


def test_rotary_positions_past_the_trained_range_still_run_where_the_engine_runs_them():
    llama = estimate("llama-3.1-8b", engine="llama.cpp", tokens=262144)
    assert llama.engine_refuses is None and llama.notes[-1].endswith("positions past the trained range may lose quality")
