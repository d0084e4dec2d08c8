"""``kvmem models`` and ``kvmem gpus``: the model presets and the GPU catalog."""

from __future__ import annotations

from .. import catalog
from ..units import format_bytes
from .common import emit


def _short_source(source: str | None) -> str:
    """The first clause of a preset's source (where its config.json was read); --json has it all."""
    text = (source or "unknown").split(", ")[0].split("; ")[0]
    return text if len(text) <= 110 else text[:107] + "..."


def cmd_models(args) -> int:
    rows = []
    for name in catalog.list_models():
        data = catalog.preset(name)
        model = catalog.get_model(name)
        rows.append({"name": name, "hf_id": data.get("hf_id"), "layers": model.num_layers,
                     "kinds": model.kinds, "params_total": model.params_total, "source": data.get("source")})
    lines = []
    for r in rows:
        lines.append(f"{r['name']:<32} {r['hf_id'] or '':<48} {r['layers']:>4} layers  "
                     + ", ".join(f"{n} {k}" for k, n in r["kinds"].items()))
        lines.append(f"{'':<4}source: {_short_source(r['source'])}")
    emit(rows, args.json, lines)
    return 0


def cmd_gpus(args) -> int:
    from ..gpus import get_gpu, list_gpus
    rows = [get_gpu(name).to_dict() for name in list_gpus()]
    emit(rows, args.json, [
        f"{r['name']:<22} {r['label'].split(' (')[0][:36]:<36} {format_bytes(r['memory_bytes']):>11} "
        f"(usable {format_bytes(r['usable_memory_bytes'])})  "
        + (f"{r['bandwidth_bytes_per_s'] / 1e12:.2f} TB/s" if r['bandwidth_bytes_per_s'] else "")
        for r in rows])
    return 0


def configure_models(models) -> None:
    models.add_argument("--json", action="store_true")
    models.set_defaults(func=cmd_models)


def configure_gpus(gpus) -> None:
    gpus.add_argument("--json", action="store_true")
    gpus.set_defaults(func=cmd_gpus)
