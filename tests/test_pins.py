"""issue 35 item 2: each engine rule sits beside its source. A pin is ``<repository>@<version> <path>#L<a>-L<b>``
(``# vllm@v0.33.0 vllm/v1/core/kv_cache_planning.py#L346-L408``) on the line it governs: it names a release kvmem
declares (an EngineSpec's ``pinned``), a path from the repository's root and a line range. Every pin in
kvmem/engines/** is read here; each engine package's docstring is a short index of its rules."""

import ast
import re
from pathlib import Path

ENGINES_DIR = Path(__file__).resolve().parent.parent / "kvmem" / "engines"
# a repository's name, "@", a version or commit: anything so spelled in kvmem/engines is a pin
PIN = re.compile(r"(?<![\w/.@-])([a-z][a-z0-9.\-]*[a-z0-9])@([A-Za-z0-9][\w.\-]*[A-Za-z0-9])")
PATH = re.compile(r" ((?:[\w.\-]+/)+[\w.\-]+\.\w+)#L(\d+)(?:-L(\d+))?\b")
MAX_DOCSTRING_LINES = 30
# pins there are at least (the count only grows: a rule moved beside its code keeps its pin)
AT_LEAST = {"vllm": 91, "sglang": 65, "llamacpp": 40, "hf": 5, "trtllm": 90}
# TensorRT-LLM citations in the older form, a file "@ <commit>" or a code-index id without a line range: none is
# left, and none may come back. The release declaration (PINNED, read by declared() as "vLLM 0.33.0" is for vLLM)
# is not a citation and is left out.
_TRTLLM_UNPINNED = re.compile(r"(?<![\w@])@ [0-9a-f]{7,}\b|code-index id \d+")
# engine packages whose docstring is not yet an index (its lines: only shrinks, and leaves at 30); none is left
LONG_DOCSTRINGS: dict[str, int] = {}


def declared() -> dict[str, set[str]]:
    """Repository name -> the versions kvmem declares for it (each EngineSpec's ``pinned``): "vLLM 0.33.0" is
    vllm@v0.33.0; a commit ("llama.cpp 0c1e57098", TRT-LLM's "@ 001541ba") is itself the version."""
    from kvmem.engines import ENGINES
    out: dict[str, set[str]] = {}
    for spec in ENGINES.values():
        if not spec.pinned:
            continue
        commits = set(re.findall(r"\b(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b", spec.pinned))
        versions = commits or {f"v{v}" for v in re.findall(r"\b\d+\.\d+(?:\.\d+)?\b", spec.pinned)}
        for name in {spec.name, spec.pinned.split()[0].lower()}:
            out.setdefault(name, set()).update(versions)
    return out


def pins() -> list[tuple[str, int, str, str, str]]:
    """(file, line, repository, version, what follows it) for every pin in kvmem/engines: a pin that ends its line
    goes on at the next one (a comment's or a docstring's next line)."""
    found = []
    for path in sorted(ENGINES_DIR.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for n, line in enumerate(lines, 1):
            for m in PIN.finditer(line):
                rest = line[m.end():]
                if not rest.strip() and n < len(lines):
                    rest = " " + lines[n].strip().removeprefix("#").strip()
                found.append((path.relative_to(ENGINES_DIR).as_posix(), n, m.group(1), m.group(2), rest))
    return found


def test_every_pin_names_a_declared_release_and_a_path_with_lines():
    known = declared()
    # TensorRT-LLM: its two pinned commits, and the commits its rules read other files at (trtllm.READ_AT)
    from kvmem.engines import trtllm
    assert known["trtllm"] == {"001541ba", "065ff9e9"}
    known["trtllm"] = known["trtllm"] | set(trtllm.READ_AT)
    assert known["vllm"] == {"v0.33.0"} and known["sglang"] == {"v0.5.23"} and known["llama.cpp"] == {"0c1e57098"}
    # llama.cpp: the vendored build, and the master commits its rules for older builds read files at
    from kvmem.engines import llamacpp
    known["llama.cpp"] = known["llama.cpp"] | set(llamacpp.READ_AT)
    bad = []
    for where, n, repo, version, rest in pins():
        if version not in known.get(repo, ()):
            bad.append(f"{where}:{n}: {repo}@{version} is not a release kvmem declares ({sorted(known.get(repo, ()))})")
            continue
        path = PATH.match(rest)
        if path is None:
            bad.append(f"{where}:{n}: {repo}@{version} names no path with a line range: {rest[:60]!r}")
        elif path.group(3) and int(path.group(3)) < int(path.group(2)):
            bad.append(f"{where}:{n}: the range #L{path.group(2)}-L{path.group(3)} runs backwards")
    assert bad == []


def test_the_pins_are_counted():
    counts: dict[str, int] = {}
    for where, *_ in pins():
        counts[where.split("/")[0]] = counts.get(where.split("/")[0], 0) + 1
    short = {engine: (counts.get(engine, 0), least) for engine, least in AT_LEAST.items()
             if counts.get(engine, 0) < least}
    assert short == {}, f"pins lost (found, at least): {short}"
    assert sum(counts.values()) >= sum(AT_LEAST.values())


def test_engine_package_docstrings_are_short_indexes():
    lengths = {}
    for init in sorted(ENGINES_DIR.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        lengths[init.parent.name] = len(doc.splitlines())
    too_long = {name: n for name, n in lengths.items()
                if n > max(MAX_DOCSTRING_LINES, LONG_DOCSTRINGS.get(name, 0))}
    assert too_long == {}, f"docstrings past their allowance: {too_long}"
    done = sorted(name for name in LONG_DOCSTRINGS if lengths.get(name, 0) <= MAX_DOCSTRING_LINES)
    assert done == [], f"an index now: drop {done} from LONG_DOCSTRINGS"


def test_no_trtllm_citation_lacks_a_line_range():
    from kvmem.engines import trtllm
    declaration = f'PINNED = "{trtllm.PINNED}"'
    assert (ENGINES_DIR / "trtllm" / "__init__.py").read_text(encoding="utf-8").count(declaration) == 1
    found = {path.name: len(_TRTLLM_UNPINNED.findall(path.read_text(encoding="utf-8").replace(declaration, "")))
             for path in sorted((ENGINES_DIR / "trtllm").glob("*.py"))}
    assert sum(found.values()) == 0, f"TensorRT-LLM citations without a path and line range: {found}"
