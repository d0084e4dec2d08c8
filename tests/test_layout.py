"""The package's shape: no import cycle in kvmem/, no private name imported across modules,
and the core importable with the standard library only."""

import ast
import subprocess
import sys
from pathlib import Path

KVMEM = Path(__file__).resolve().parent.parent / "kvmem"


def _module_name(path: Path) -> str:
    parts = path.relative_to(KVMEM.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path):
    """(imported kvmem module, names taken from it) for every import in the file, nested ones too."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "kvmem" or target.startswith("kvmem."):
                yield target, [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("kvmem"):
                    yield alias.name, []


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in KVMEM.rglob("*.py")}
    graph = {name: set() for name in modules}
    for name, path in modules.items():
        for target, names in _imports(path):
            for imported in [f"{target}.{n}" for n in names if f"{target}.{n}" in modules] or [target]:
                if imported in modules and imported != name:
                    graph[name].add(imported)
    return graph


def _is_package_of(name: str, other: str) -> bool:
    return other.startswith(name + ".")


def test_no_import_cycle():
    graph = _graph()
    # a package's __init__ re-exporting its own submodules is not a cycle with them
    edges = {a: {b for b in bs if not _is_package_of(a, b) and not _is_package_of(b, a)} for a, bs in graph.items()}
    seen, stack, cycles = set(), [], []

    def visit(node):
        if node in stack:
            cycles.append(stack[stack.index(node):] + [node])
            return
        if node in seen:
            return
        seen.add(node)
        stack.append(node)
        for nxt in sorted(edges[node]):
            visit(nxt)
        stack.pop()

    for node in sorted(edges):
        visit(node)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_no_private_name_imported_across_modules():
    offenders = []
    for path in KVMEM.rglob("*.py"):
        for target, names in _imports(path):
            offenders += [f"{_module_name(path)} imports {target}.{n}" for n in names
                          if n.startswith("_") and not n.startswith("__")]
    assert not offenders, offenders


def test_import_kvmem_loads_no_third_party_package():
    code = ("import sys, kvmem; heavy = {'torch', 'pandas', 'plotly', 'streamlit', 'huggingface_hub', 'gguf', "
            "'numpy', 'transformers'}; print(sorted(heavy & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# issue 24 items 3 and 5 and the smaller ones: each rule has one home, found by its spelling
ONE_HOME = {
    # tp splitting a count evenly ("x % tp"), and its message
    "tp divides": (r"%\s*tp\b|\btp\s*%|tp=\{tp\} must divide", "kvmem/parallel.py"),
    # every pipeline stage holds a layer: pp <= layers
    "pp <= layers": (r"pp=\{pp\} exceeds|pp > n_layers?\b|pp > model\.num_layers", "kvmem/parallel.py"),
    # a rank above the KV heads keeps a whole replicated head
    "replicated heads": (r"1 - Fraction\(\w+, tp\)", "kvmem/parallel.py"),
    # the KV budget: what the weights (and the rest) leave of a fraction of memory
    "kv budget": (r"\.numerator // \w+\.denominator - |- req\.weights_bytes", "kvmem/engines/budget.py"),
    # a float format's bytes per element: written once, in the format table
    "float bytes": (r'DType\("bf16", 1, 2\)|["\'](?:bf16|bfloat16|fp16|float16|fp32|float32)["\']\s*:\s*[24]\b',
                    "kvmem/dtypes.py"),
    # a composite KV dtype ("q8_0/f16", "K int4 / V int2") read into its K and V: kvmem.dtypes.kv_pair
    "kv pair": (r'\.partition\("/"\)|kv_dtype\)?\.split\("/"\)', "kvmem/dtypes.py"),
}


def test_each_rule_has_one_home():
    import re
    root = KVMEM.parent
    paths = [*KVMEM.rglob("*.py"), *(root / "ui").glob("*.py"), root / "app.py"]
    sources = {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8") for p in paths}
    for rule, (pattern, home) in ONE_HOME.items():
        homes = sorted(path for path, text in sources.items() if re.search(pattern, text))
        assert homes == [home], f"{rule}: {homes}"


# issue 24 item 1 and issue 35 item 1: outside kvmem/engines/ no module names an engine or one of its
# options (a string equal to one, or a keyword argument named as one): an engine's launch command
# (EngineSpec.launch) and log reader (EngineSpec.log_reader) live in its package. What stays, and why:
REFERENCE = {"ideal"}   # kvmem's own textbook count, the reference every comparison is against
VOCABULARY = {          # option names that are also kvmem's own words (a kind, a result field, a config field)
    "mla", "block_size", "version", "backend", "build", "prompt_tokens", "mamba_ssm_dtype", "mamba_ssm_cache_dtype",
    "residual_length", "page_size", "n_ctx", "tokens_per_block"}
NAMES_ENGINES = {
    "kvmem/oracles/": "each oracle runs one engine's own code as the judge",
    "kvmem/measurement/": "builds transformers' caches with torch: what the hf modes size",
    "kvmem/validation.py": "kvmem validate: measured caches against the hf modes",
    "kvmem/defaults.py": "the default engine of the CLI and the app, declared once",
}


def _names_engines(path: Path, names: set[str], options: set[str]) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names | options:
            found.add(node.value)
        elif isinstance(node, ast.keyword) and node.arg in options:
            found.add(node.arg)
    return found


def test_no_module_outside_the_engines_names_an_engine_or_its_options():
    from kvmem.engines import ENGINES
    root = KVMEM.parent
    names = set(ENGINES) - REFERENCE
    options = {name for spec in ENGINES.values() for name in spec.options} - VOCABULARY
    paths = [*KVMEM.rglob("*.py"), *(root / "ui").glob("*.py"), root / "app.py"]
    offenders = {}
    for path in paths:
        rel = path.relative_to(root).as_posix()
        if rel.startswith("kvmem/engines/") or any(rel.startswith(allowed) for allowed in NAMES_ENGINES):
            continue
        found = _names_engines(path, names, options)
        if found:
            offenders[rel] = sorted(found)
    assert offenders == {}
    stale = [allowed for allowed in NAMES_ENGINES
             if not any(_names_engines(p, names, options) for p in paths
                        if p.relative_to(root).as_posix().startswith(allowed))]
    assert stale == [], "allowed but naming no engine: drop from NAMES_ENGINES"


# issue 24 item 4: a module reads in one sitting: about 300 lines (350 at most) unless its docstring
# says why ("Over 300 lines by design: ..."). None is left.


def test_modules_read_in_one_sitting():
    long = {}
    for path in KVMEM.rglob("*.py"):
        rel = path.relative_to(KVMEM.parent).as_posix()
        text = path.read_text(encoding="utf-8")
        if text.count("\n") <= 350:
            continue
        if "Over 300 lines by design:" not in (ast.get_docstring(ast.parse(text)) or ""):
            long[rel] = text.count("\n")
    assert long == {}


def test_no_option_is_read_with_get_outside_its_engine():
    """issue 24 item 1: an engine's options (and fit's) are read by the engine, or once into a typed
    record (vLLM's VllmOptions, sizing.setup.Given); modules that are one engine's by design excepted."""
    import re

    from kvmem.engines import ENGINES
    root = KVMEM.parent
    options = ({name for spec in ENGINES.values() for name in spec.options}
               | {name for spec in ENGINES.values() if spec.sizing for name in spec.sizing.options}) - VOCABULARY
    read = re.compile(r"\.get\(\s*[\"'](%s)[\"']" % "|".join(map(re.escape, sorted(options))))
    offenders = []
    for path in [*KVMEM.rglob("*.py"), *(root / "ui").glob("*.py"), root / "app.py"]:
        rel = path.relative_to(root).as_posix()
        if rel.startswith("kvmem/engines/") or any(rel.startswith(allowed) for allowed in NAMES_ENGINES):
            continue
        offenders += [f"{rel}: {m.group(1)}" for m in read.finditer(path.read_text(encoding="utf-8"))]
    assert offenders == []


# issue 35 item 1: an engine is one package. A toy engine registered here, and only here, gets a launch
# command from kvmem.plan and has its log read by kvmem.check_log: neither switches on an engine's name.
TOY_LOG_MIB = 512.0    # 4,096 tokens x 131,072 B (llama-3.1-8b: 32 layers x 2 (K, V) x 8 KV heads x 128 x 2 B, bf16)


def _toy_flags(inputs):
    from kvmem.launch.base import Flag
    return (Flag("", inputs.model.name, "the model"), Flag("--ctx", str(inputs.fit.context), "the context planned"),
            Flag("--seqs", str(inputs.batch), "the sequences planned"))


def _toy_read(lines):
    prefix = "toy: "
    return [(n, line) for n, line in enumerate(lines, 1) if line.startswith(prefix) and " tokens take " in line]


def _toy_check(model, found, *, kv_dtype, tp, pp, info=None, **options):
    from kvmem.engines import engine_estimate
    from kvmem.logcheck.base import LineCheck
    checks = []
    for n, line in found:
        tokens, mib = line[len("toy: "):].split(" tokens take ")
        ours = engine_estimate(model, engine="toy", tokens=int(tokens), kv_dtype=kv_dtype, tp=tp, pp=pp,
                               **options).kv_bytes / 2**20
        logged = float(mib.removesuffix(" MiB"))
        checks.append(LineCheck(line=n, text=line, quantity="toy pool", logged=f"{logged:.2f} MiB",
                                kvmem=f"{ours:.2f} MiB", matches=logged == ours))
    return {"tokens": int(tokens)}, checks, []


def test_a_toy_engine_gets_a_launch_line_and_a_log_reader(monkeypatch):
    from dataclasses import replace

    import kvmem
    from kvmem.engines import ENGINES
    from kvmem.engines.serving import Launcher, LogReader
    from kvmem.launch import launchers
    from kvmem.logcheck import readers
    rules = ENGINES["trtllm"]          # the toy sizes as TRT-LLM does; its command and its log are its own
    launch = Launcher("Toy 1.0", ("toy-serve",), _toy_flags)
    reader = LogReader(_toy_read, bool, lambda lines: {}, _toy_check, "the toy's pool line", runs=("toy-serve ",),
                       command_flags={"--tp": "tp"}, positional_model=True)
    monkeypatch.setitem(ENGINES, "toy", replace(rules, name="toy", pinned="Toy 1.0", launch=launch,
                                                log_reader=reader))
    assert "toy" in launchers() and "toy" in readers()
    plan = kvmem.plan("llama-3.1-8b", gpu="H100", context="8k", engine="toy", target="max_batch")
    same = kvmem.fit("llama-3.1-8b", gpu="H100", context="8k", engine="trtllm")
    assert plan.release == "Toy 1.0" and plan.files == {}
    assert plan.command == f"toy-serve llama-3.1-8b --ctx 8192 --seqs {same.max_batch}" and same.max_batch > 0
    log = "toy-serve llama-3.1-8b --tp 1\ntoy: 4096 tokens take 512.00 MiB\n"
    result = kvmem.check_log(log)                     # engine and model from the log: the toy's reader claims it
    assert result.engine == "toy" and result.model == "llama-3.1-8b" and result.matches
    assert [(c.line, c.logged, c.kvmem) for c in result.checks] == [(2, "512.00 MiB", f"{TOY_LOG_MIB:.2f} MiB")]
    assert result.inputs["model"][1].startswith("log line 1, the command")
    wrong = kvmem.check_log(log.replace("512.00", "256.00"))
    assert wrong.engine == "toy" and not wrong.matches


def test_each_engines_command_and_log_reader_live_in_its_package():
    """issue 35 item 1: kvmem/launch and kvmem/logcheck hold only the engine-blind machinery; every Launcher
    and LogReader an engine registers is built from functions of its own package."""
    from kvmem.engines import ENGINES
    generic = {"launch": {"__init__.py", "base.py"}, "logcheck": {"__init__.py", "base.py", "command.py", "printed.py"}}
    for folder, allowed in generic.items():
        assert {p.name for p in (KVMEM / folder).glob("*.py")} == allowed, folder
    homes = {}
    for name, spec in ENGINES.items():
        parts = [spec.launch.flags] if spec.launch else []
        parts += [spec.log_reader.read, spec.log_reader.check, spec.log_reader.printed] if spec.log_reader else []
        homes[name] = {f.__module__.rsplit(".", 1)[0] for f in parts}
    assert homes["vllm"] == {"kvmem.engines.vllm"} and homes["llama.cpp"] == {"kvmem.engines.llamacpp"}
    assert all(len(h) <= 1 and all(m.startswith("kvmem.engines.") for m in h) for h in homes.values()), homes
    assert sorted(n for n, h in homes.items() if h) == ["llama.cpp", "sglang", "trtllm", "vllm"]
