"""A report's JSON document (kvmem.export.document) as Markdown: the same content, for people."""

from __future__ import annotations

import json

from ..sizing.results import decode_words, part_names, shown_parts
from ..units import format_bytes


def _row(*cells) -> str:
    return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"


def _bytes(n) -> str:
    return "—" if n is None else f"{n:,} B ({format_bytes(n)})"


def markdown(doc: dict) -> str:
    """The Markdown report of ``doc`` (Report.to_dict())."""
    fit, inputs = doc["fit"], doc["inputs"]
    verdict = "fits" if fit["fits"] else "does not fit"
    out = [f"# kvmem plan: {fit['model']} on {fit['num_gpus']} × {fit['gpu']} ({fit['engine']}): {verdict}", "",
           f"kvmem {doc['kvmem_version']}; GiB = 2³⁰ bytes. The JSON report of the same run re-runs with "
           "`kvmem.rerun_report`.", "", "## Inputs", "", _row("input", "value"), _row("---", "---")]
    for name, value in inputs.items():
        shown = json.dumps(value) if isinstance(value, dict) else ("—" if value is None else value)
        if name == "model" and isinstance(value, dict) and "config" in value:
            shown = f"{value.get('name')} (its config.json is in the JSON report)"
        out.append(_row(name, shown))
    out += ["", "## Results", "", _row("quantity", "value"), _row("---", "---"),
            _row("fits", f"{verdict} ({fit['batch'] or 1} × {fit['context']:,} tokens)"),
            _row("tp × pp, replicas", f"{fit['tp']} × {fit['pp']}, {fit['replicas']}"),
            _row("weights, KV format", f"{fit['weight_dtype']}, {fit['kv_dtype']}"),
            _row(f"max batch at {fit['context']:,} tokens", f"{fit['max_batch']:,}"),
            _row(f"max context at batch {fit['batch'] or 1}", f"{fit['max_context']:,}"),
            _row("fewest GPUs", fit["min_gpus"] if fit["min_gpus"] is not None else "none up to tp 64"),
            _row("KV per sequence (per device)", _bytes(fit["kv_bytes_per_sequence"])),
            _row("KV budget (per device)", _bytes(fit["kv_memory_bytes"]))]
    if decode_words(fit) is not None:
        out.append(_row("decode bound", decode_words(fit)))
    if fit["engine_refuses"]:
        out.append(_row("the engine refuses", fit["engine_refuses"]))
    names = part_names(fit["engine"])
    out += ["", f"## Memory per device ({fit['breakdown_batch']:,} × {fit['breakdown_context']:,} tokens)", "",
            _row("part", "bytes"), _row("---", "---")]
    out += [_row(names.get(part, part), _bytes(value))
            for part, value in shown_parts(fit["breakdown"], fit["fits"]).items()]
    if doc["engine_lines"]:
        out += ["", f"## What the engine will print (for {doc['engine_lines_for']})", "", "```",
                *doc["engine_lines"], "```"]
    out += ["", "## Launch command", ""]
    plan = doc["plan"]
    if plan:
        out += [f"{plan['release']}: {plan['batch']:,} sequence(s) × {plan['context']:,} tokens.", "", "```bash",
                plan["command"], "```", ""]
        out += [f"- `{' '.join(p for p in (f['flag'], f['value']) if p)}` — {f['reason']}" for f in plan["flags"]]
        for name, text in plan["files"].items():
            out += ["", f"Beside it, `{name}`:", "", "```yaml", text.rstrip("\n"), "```"]
    elif not fit["fits"]:   # the shortfall and the changes are said once, from the fit: not again here
        out.append("No command: the workload does not fit (its shortfall is under Memory per device, the changes "
                   "that fit under What would fit).")
    else:
        why = doc["plan_refused"] or ""
        out.append(f"No command: {why.removeprefix('no command: ')}")
    if fit["suggestions"]:
        out += ["", "## What would fit", ""] + [f"- {s}" for s in fit["suggestions"]]
    if fit["notes"]:
        out += ["", "## Notes", ""] + [f"- {n}" for n in fit["notes"]]
    out += ["", "## Sources", ""]
    model, gpu = doc["sources"]["model"], doc["sources"]["gpu"]
    out.append(f"- model {model['name']}" + (f" ({model['hf_id']})" if model.get("hf_id") else "")
               + f": config.json from {model['config']}")
    for fact, value in (model.get("published") or {}).items():
        if fact.endswith("_source"):
            out.append(f"- {model['name']} {fact.removesuffix('_source')}: {value}")
    out.append(f"- GPU {gpu['name']} ({gpu['label']}): {gpu['memory_bytes']:,} B, "
               f"{gpu['usable_memory_bytes']:,} B usable ({gpu['usable_memory_source']})")
    for key in ("memory_source", "cuda_total_memory_source", "spec_source", "source"):
        if gpu.get(key):
            out.append(f"- GPU {key.replace('_', ' ')}: {gpu[key]}")
    return "\n".join(out) + "\n"
