"""Property-style: random widget values on the calculator never raise — errors are messages."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kvmem
from kvmem.engines import ENGINES
from tests.ui.apptest import run

TOKENS = st.one_of(st.integers(-5, 2_000_000).map(str), st.sampled_from(["128k", "1M", "1.5k", "abc", "", "0.5", "8k"]),
                   st.text(max_size=6))


@pytest.fixture(scope="module")
def app():
    return run("app.py")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(model=st.sampled_from(kvmem.list_models()), tokens=TOKENS, batch=st.integers(1, 4096),
       kv_dtype=st.sampled_from(["auto", "bf16", "fp8", "int4", "q8_0", "q4_0", "nvfp4"]),
       engine=st.sampled_from(list(ENGINES)), tp=st.sampled_from([1, 2, 3, 8, 64]), pp=st.sampled_from([1, 2, 7]))
def test_random_inputs_never_raise(app, model, tokens, batch, kv_dtype, engine, tp, pp):
    app.selectbox(key="model").set_value(model)
    app.text_input(key="tokens").set_value(tokens)
    app.number_input(key="batch").set_value(batch)
    app.selectbox(key="kv_dtype").set_value(kv_dtype)
    app.selectbox(key="engine").set_value(engine)
    app.number_input(key="tp").set_value(tp)
    app.number_input(key="pp").set_value(pp)
    app.run()
    assert not app.exception
    if app.error:
        assert all(e.value and "Something went wrong" not in e.value for e in app.error), app.error[0].value
    else:
        expected = kvmem.estimate(model, engine=engine, tokens=tokens, batch=batch, kv_dtype=kv_dtype, tp=tp, pp=pp)
        assert app.metric[0].value == kvmem.format_bytes(expected.total_bytes)
