"""A numbers snapshot: every preset x every engine mode x two contexts on one GPU -> JSON.

Records kvmem.estimate, kvmem.capacity, kvmem.compare_strategies (default strategies), kvmem.fit
and kvmem.sweep's rows, so that a refactoring can be checked byte for byte:

    python tools/numbers_snapshot.py /tmp/before.json     # at the base commit (a clean clone)
    python tools/numbers_snapshot.py /tmp/after.json      # after the change
    cmp /tmp/before.json /tmp/after.json

(from a clean clone, put it first on the path: PYTHONPATH=. python tools/numbers_snapshot.py ...)

An input kvmem refuses is recorded as its message and the builtin exception class it derives from
(so a refusal given a more precise type, with the same message, reads the same).
"""

from __future__ import annotations

import builtins
import json
import os
import sys

if os.environ.get("PYTHONHASHSEED") != "0":   # a few messages print a set: fix its order
    os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"})

import kvmem  # noqa: E402

GPU = "h100-sxm-80gb"
CONTEXTS = (4096, 32768)
BATCH = 2
KV_MEMORY = 20 * 2**30


def _plain(value):
    if hasattr(value, "to_dict"):
        return _plain(value.to_dict())
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def _refused(exc: BaseException) -> dict:
    base = next(c for c in type(exc).__mro__ if getattr(builtins, c.__name__, None) is c)
    return {"refused": base.__name__, "message": str(exc)}


def _call(fn, *args, **kwargs):
    try:
        return _plain(fn(*args, **kwargs))
    except (ValueError, TypeError, KeyError, NotImplementedError) as exc:
        return _refused(exc)


def snapshot() -> dict:
    engines = kvmem.list_engines()
    out: dict = {"gpu": GPU, "contexts": list(CONTEXTS), "engines": engines, "models": {}}
    for name in kvmem.list_models():
        model = kvmem.get_model(name)
        rows: dict = {}
        for engine in engines:
            for context in CONTEXTS:
                key = f"{engine}@{context}"
                rows[key] = {
                    "estimate": _call(kvmem.estimate, model, engine=engine, tokens=context, batch=BATCH),
                    "capacity": _call(kvmem.capacity, model, engine=engine, kv_memory=KV_MEMORY,
                                      max_model_len=context),
                    "strategies": _call(kvmem.compare_strategies, model, tokens=context, batch=BATCH,
                                        engine=engine),
                    "fit": _call(kvmem.fit, model, gpu=GPU, context=context, engine=engine),
                }
        out["models"][name] = rows
    sweep_engines = [e for e in engines if e not in ("ideal", "hf-dynamic", "hf-static", "hf-quantized")]
    out["sweep"] = _call(kvmem.sweep, None, [GPU], contexts=CONTEXTS, engines=sweep_engines)
    return out


def main(argv: list[str]) -> int:
    text = json.dumps(snapshot(), indent=1, sort_keys=True, default=repr)
    if len(argv) > 1:
        with open(argv[1], "w") as handle:
            handle.write(text + "\n")
    else:
        sys.stdout.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
