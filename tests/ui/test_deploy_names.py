"""Issue 32 M6 in the app: the Deploy panel's explanation lines quote the model argument as the
command does (Flag.shell), in a code block: a name is never markdown and never prints a raw newline."""

import json

from kvmem.catalog import preset
from tests.ui.apptest import load


def test_a_hostile_name_is_quoted_in_the_deploy_lines():
    name = "--evil`](https://example.invalid)\nsecond line"
    at = load("ui/fit.py")
    at.run()
    at.radio(key="source").set_value("Paste JSON").run()
    at.text_area(key="pasted").set_value(json.dumps({**preset("llama-3.1-8b")["config"], "_name_or_path": name}))
    at.run()
    assert not at.exception
    lines = next(c.value for c in at.code if "# kvmem knows no Hugging Face id" in c.value)
    assert lines.startswith("$'./--evil`](https://example.invalid)\\x0asecond line'")
    assert all(line.isprintable() for line in lines.split("\n"))
    assert not any("example.invalid" in m.value for m in at.markdown)
