"""The README's examples run and print what their comments say."""

import contextlib
import io
import pathlib
import re

README = (pathlib.Path(__file__).resolve().parents[1] / "README.md").read_text()


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, flags=re.S)


def test_five_line_example_prints_its_comments():
    block = python_blocks()[0]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {})
    printed = out.getvalue().splitlines()
    expected = [line.split("# ", 1)[1] for line in block.splitlines() if line.startswith("print(")]
    assert printed[0] == expected[0] == "68719476736 64.00 GiB"
    assert expected[1].startswith(printed[1]) and printed[1] == "70272"


def test_contract_examples_run():
    namespace = {}
    exec(compile("import kvmem\n" + python_blocks()[1], "README.md", "exec"), namespace)
    fit = namespace["kvmem"].fit("llama-3.3-70b", gpu="h100-sxm-80gb", num_gpus=2, context="32k", batch=16,
                                 kv_dtype="fp8", weight_dtype="fp8")
    assert fit.fits is False and fit.max_batch == 14  # as the README's comment says


def test_seed_numbers_in_readme_match_the_formula():
    import kvmem
    assert "8,388,608,000 bytes = 7.81 GiB (8.39 GB)" in README
    assert kvmem.format_bytes(8_388_608_000) == "7.81 GiB"
    assert "262,144,000" in README and kvmem.formula(bytes_per_element=2, batch=1, layers=32, kv_heads=32,
                                                     head_dim=128, tokens=500) == 262_144_000
    assert f"`kvmem/data/models/*.json`, {len(kvmem.list_models())})" in README
    assert f"`kvmem/data/gpus.json`, {len(kvmem.list_gpus())})" in README


def test_readme_says_what_the_seed_is_and_which_config_limit_applies_where():
    # issue 23 item 24
    import kvmem.configs.files as files
    import ui.inputs

    assert "*The seed* is the tutorial notebook kvmem started from" in README
    assert files.MAX_CONFIG_BYTES == 4 * 2**20 and "read (API and CLI) from a regular UTF-8 file of at most 4 MiB" in README
    assert ui.inputs.MAX_CONFIG_BYTES == 1_000_000 and "in the app is at most 1 MB (1,000,000 bytes" in README
    # item 16: the defaults the README names are the code's
    assert "engine `vllm` and KV dtype `auto`" in README and (kvmem_defaults().ENGINE, kvmem_defaults().KV_DTYPE) == (
        "vllm", "auto")


def kvmem_defaults():
    from kvmem import defaults
    return defaults
