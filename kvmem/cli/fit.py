"""``kvmem fit``: does a workload fit on these GPUs, how fast can it decode; llama.cpp's layer
offload on mixed cards."""

from __future__ import annotations

import sys

from ..units import format_bytes
from .common import (
    add_fit_arguments,
    emit,
    engine_numbers_lines,
    engine_options,
    engine_refusal,
    fit_options,
    read_model,
)


def _condition(result) -> str:
    """What a 'yes' rests on that kvmem could not check (llama.cpp's placement: the host's free RAM)."""
    condition = (result.placement or {}).get("condition") if result.fits else ""
    return f", {condition}" if condition else ""


def _weights_line(result) -> str:
    """Which weight bytes fit used: a checkpoint's headers (exact), the formula (fallback), or given."""
    per_device = format_bytes(result.breakdown.get("weights", 0))
    if result.placement:
        source = ("the gguf headers' own tensors, exact" if result.weight_dtype == "gguf"
                  else f"the {result.weight_dtype} tensors kvmem lays out from the config")
        return (f"weights from: {source}, as placed: {per_device} on {result.placement['device']}, "
                f"{format_bytes(result.placement['host_bytes'])} in host RAM in all")
    if result.weight_dtype in ("safetensors", "gguf"):
        return f"weights from: the {result.weight_dtype} headers, exact ({per_device} per device)"
    if result.weight_dtype == "given":
        return f"weights from: weights_bytes as given ({per_device} per device)"
    return (f"weights from: the formula, {result.weight_dtype} x the config's parameter count ({per_device} per "
            "device; no safetensors or GGUF headers used)")


def _breakdown_text(result) -> str:
    """The per-device parts; the engine's reserve and the KV it lacks named as such (kvmem.sizing.part_names)."""
    from ..sizing import part_names
    from ..sizing.results import shown_parts
    names = {**{k: k for k in result.breakdown}, "free": part_names(result.engine)["free"],
             "shortfall": part_names(result.engine)["shortfall"]}
    return ", ".join(f"{names[k]} {format_bytes(v)}" for k, v in shown_parts(result.breakdown, result.fits).items())


def _offload_inputs(args) -> tuple[dict, str | None]:
    """llama.cpp's options (-o, and --host-memory's size as host_memory_bytes) and --host-memory's bandwidth."""
    options = engine_options(args.option)
    bandwidth, host_bytes = host_memory_argument(getattr(args, "host_memory", None))
    if host_bytes is not None:
        options["host_memory_bytes"] = host_bytes
    return options, bandwidth


def _offload_lines(model, args) -> tuple[list[str], dict]:
    """llama.cpp on one kind of card: the placement that keeps the most on the GPUs, --fit on's, both commands."""
    from ..engines.llamacpp.panel import host_shortfall, panel_offload
    from ..units import parse_tokens
    options, bandwidth = _offload_inputs(args)
    try:
        p = panel_offload(model, gpus=[args.gpu] * (args.num_gpus or 1), context=parse_tokens(args.context),
                          batch=args.batch, weight_dtype=args.weight_dtype, kv_dtype=args.kv_dtype,
                          host_memory=bandwidth, options=options)
    except ValueError as exc:
        return [f"llama.cpp offload: not placed: {exc}"], {"error": str(exc)}
    short = host_shortfall(p, options)       # the bound the verdict holds the placement to
    return _placement_lines(p, short), {**p.to_dict(), "host_shortfall": short}


def _placement_lines(p, short: str | None) -> list[str]:
    """An offload plan (kvmem.llamacpp_offload) as lines: kvmem's placement and --fit on's, each with its command."""
    lines = [f"llama.cpp offload on {' + '.join(p.gpus)} at {p.context:,} tokens:"]
    if short:
        lines.append(f"  {short}")
    for label, lay, tps, cmd in (("kvmem", p.best, p.decode_best, p.command_best),
                                 ("--fit on", p.fit, p.decode_fit, p.command_fit)):
        if lay is None:
            lines.append(f"  {label}: nothing fits")
            continue
        mib = ", ".join(f"{d} {lay.total_bytes[d] / 2**20:,.0f} MiB" for d in lay.total_bytes)
        speed = f"{tps:,.1f} tokens/s" if tps else "needs --host-memory (and GPU bandwidth)"
        lines += [f"  {label}: {lay.placement.offloaded_layers}/{lay.placement.layers_total} layers on the GPUs, "
                  f"n_ctx {lay.n_ctx:,}; {mib}; decode bound {speed}", f"    {cmd}"]
        if label != "kvmem":
            lines.append(f"    (it chooses {' '.join(lay.flags())})")
    lines.append(f"  how --fit on chose: {p.fit_note}")
    lines += [f"  note: {note}" for note in p.notes]
    return lines


def host_memory_argument(value) -> tuple[str | None, int | None]:
    """--host-memory: (a host RAM bandwidth for llama.cpp's decode bound, the node's host RAM in bytes); each
    part of a comma list is a bandwidth ('89.6GB/s', a kvmem/data/host_memory.json preset) or a size
    ('512GiB', a kvmem.host.NODE_PRESETS node)."""
    from ..engines.llamacpp.offload import host_memory_presets
    from ..host import host_memory_bytes
    bandwidth = size = None
    for part in (value or "").split(","):
        part = part.strip()
        if not part:
            continue
        if part.lower() in host_memory_presets() or part.lower().endswith("/s"):
            bandwidth = part
        else:
            size = host_memory_bytes(part)
    return bandwidth, size


def host_lines(host: dict | None) -> list[str]:
    """The host RAM side of a fit (kvmem.host): each term with its source, the total and the bound."""
    if not host:
        return []
    bound = host["host_memory_bytes"]
    head = (f"host RAM per node: {format_bytes(host['total_bytes'])}"
            + (f" of {format_bytes(bound)} (--host-memory)" if bound is not None
               else " (no --host-memory: not checked)"))
    lines = [head]
    for t in host["terms"]:
        tokens = f", holds {t['tokens']:,} tokens" if t.get("tokens") is not None else ""
        counted = "" if t["binding"] else " (not counted)"
        lines.append(f"  {t['name']}: {format_bytes(t['bytes_per_node'])} ({t['bytes_per_node']:,} B){tokens}"
                     f"{counted}; {t['source']}")
    return lines


_FLAGS = {"num_gpus": "--num-gpus", "tp": "--tp", "pp": "--pp", "context": "--context", "batch": "--batch",
          "weight_dtype": "--weight-dtype", "kv_dtype": "--kv-dtype",
          "gpu_memory_utilization": "--gpu-memory-utilization"}


def lever_flags(change: dict) -> str:
    """A lever's change (kvmem.fit arguments) as this command's flags; an option unset is one to leave out."""
    words = []
    for name, value in change.items():
        if name in _FLAGS:
            words.append(f"{_FLAGS[name]} {value}")
        else:
            words.append(f"-o {name}={value}" if value is not None else f"no -o {name}")
    return " ".join(words)


def _mixed_flags(args) -> list[str]:
    """The cards of --gpu A,B,...; --num-gpus, --tp or --pp that contradict the list refused by name (llama.cpp
    splits the layers over the cards listed, one each: pp = their number, tp 1)."""
    gpus = [g.strip() for g in args.gpu.split(",")]
    n = len(gpus)
    for flag, value, fine in (("--num-gpus", args.num_gpus, (1, n)), ("--pp", args.pp, (1, n)),
                              ("--tp", args.tp, (None, 1))):
        if value not in fine:
            raise ValueError(f"{flag} {value}: --gpu {args.gpu} lists {n} cards, which llama.cpp runs as one "
                             f"replica split by layers over the {n} (num_gpus {n}, pp {n}, tp 1); give {flag} "
                             "so, or leave it out")
    from ..sizing.setup import Given
    given = Given.of(engine_options(args.option))
    for name, value in (("--weights", getattr(args, "weights", None)), ("-o weights_bytes", given.weights_bytes),
                        ("-o activation_bytes", given.activation_bytes)):
        if value is not None:
            raise ValueError(f"{name}: on mixed cards kvmem lays out llama.cpp's tensors and buffers itself (its "
                             "placement takes no byte counts); leave it out, or give one --gpu for the sizing "
                             "that takes it")
    return gpus


def mixed_cards_answer(model, args) -> dict:
    """--gpu A,B with llama.cpp: kvmem.engines.llamacpp.panel.mixed_cards (the app's Fit page reads the same
    record) after the flags are checked against the list; its lines, its record and ``placed(context, batch)``,
    the placement of another workload on the same cards (kvmem plan's command)."""
    from ..engines.llamacpp.panel import mixed_cards
    from ..units import parse_tokens
    gpus = _mixed_flags(args)
    options, bandwidth = _offload_inputs(args)
    # refused (an unknown card, an option, a layout it cannot place): ValueError, exit 2
    got = mixed_cards(model, gpus, context=parse_tokens(args.context), batch=args.batch,
                      weight_dtype=args.weight_dtype, kv_dtype=args.kv_dtype, host_memory=bandwidth, options=options)
    return {"engine": got.engine, "gpus": list(got.gpus), "lines": _placement_lines(got.plan, got.host_shortfall),
            "data": got.to_dict(), "context": got.context, "batch": got.batch, "fits": got.fits,
            "max_batch": got.max_batch, "max_context": got.max_context, "placed": got.placed, "record": got}


def _mixed_cards(model, args) -> int:
    """kvmem fit --gpu A,B (mixed_cards_answer): exit 0 when kvmem's placement runs, 1 when none does."""
    got = mixed_cards_answer(model, args)
    record = got["record"]
    gpus, lines, context, batch, fits = got["gpus"], got["lines"], got["context"], got["batch"], got["fits"]
    workload = f"{context:,} tokens x batch {batch}" if batch is not None else f"{context:,} tokens, batch 1"
    lines.insert(0, f"{model.name} on {' + '.join(gpus)} · llama.cpp: "
                    + ("fits with the placement below" if fits else "does not fit: no placement below runs"))
    condition = (f", if the host has {format_bytes(record.host_bytes)} of free RAM for it (not checked: --host-memory "
                 "checks it)") if fits and record.host_bytes and not record.host_checked else ""
    lines[1:1] = [f"fits: {'yes' if fits else 'no'}{condition} — {workload}",
                  f"max batch at {context:,} tokens: {got['max_batch']}",
                  f"max context at batch {batch or 1}: {got['max_context']:,}"]
    emit({"model": model.name, "gpu": gpus, "num_gpus": len(gpus), "tp": 1, "pp": len(gpus), "engine": got["engine"],
          "context": context, "batch": batch, "fits": fits, "max_batch": got["max_batch"],
          "max_context": got["max_context"], "llamacpp_offload": got["data"]}, args.json, lines)
    return 0 if fits else 1


def own_flags_answer(model, args):
    """--llama-args "FLAGS": kvmem.engines.llamacpp.own_flags of the user's llama-server flags on the cards of
    --gpu (a list, or one card x --num-gpus), the record kvmem fit, kvmem plan --json and the Fit page show."""
    from ..engines import engine_spec
    from ..engines.llamacpp.own_flags import own_flags
    from ..units import parse_tokens
    if "offload" not in engine_spec(args.engine).panels:
        raise ValueError(f"--llama-args: the flags of llama.cpp's llama-server; engine {args.engine} is not "
                         "llama.cpp: give --engine llama.cpp, or leave --llama-args out")
    if "," in args.gpu:
        gpus = _mixed_flags(args)
    else:
        n = args.num_gpus or 1
        if args.tp not in (None, 1) or args.pp not in (1, n):
            raise ValueError(f"--tp {args.tp} / --pp {args.pp}: llama.cpp splits the layers over the {n} card"
                             f"{'s' * (n != 1)} by -ts (num_gpus {n}, pp {n}, tp 1); leave --tp and --pp out")
        gpus = [args.gpu] * n
    options, bandwidth = _offload_inputs(args)
    if getattr(args, "weights", None):      # -o weights_bytes / activation_bytes: refused by own_flags
        raise ValueError("--weights: kvmem lays out llama.cpp's tensors and buffers for your flags itself (they take "
                         "no byte counts); leave it out")
    return own_flags(model, gpus, llama_args=args.llama_args, context=parse_tokens(args.context), batch=args.batch,
                     weight_dtype=args.weight_dtype, kv_dtype=args.kv_dtype, host_memory=bandwidth, options=options)


def _own_flags(model, args) -> int:
    """kvmem fit --llama-args: the verdict of the user's flags; exit 0 when they fit, 1 when they do not."""
    got = own_flags_answer(model, args)
    emit({"model": model.name, "gpu": list(got.gpus), "engine": got.engine, "context": got.context,
          "batch": got.batch, "fits": got.fits, "max_batch": got.max_batch, "max_context": got.max_context,
          "own_flags": got.to_dict()}, args.json, [f"{model.name}: {got.lines()[0]}", *got.lines()[1:]])
    return 0 if got.fits else 1


def cmd_fit(args) -> int:
    """Exit 0 when the workload fits, 1 when it does not (the reason and what would fit printed)."""
    from ..engines import engine_spec
    from ..sizing import fit
    if args.engine.strip().lower() == "all" or "," in args.engine:   # "which engine?": kvmem compare
        from .compare import cmd_compare
        return cmd_compare(args)
    model = read_model(args.model, args.revision)
    if getattr(args, "llama_args", None) is not None:     # the user's own llama-server flags
        return _own_flags(model, args)
    offload = "offload" in engine_spec(args.engine).panels   # the engine places layers on GPUs and host
    if offload and "," in args.gpu:     # mixed cards: the offload placement only, its verdict first
        return _mixed_cards(model, args)
    options = fit_options(args)
    host_bytes = host_memory_argument(args.host_memory)[1]
    if host_bytes is not None:
        if "host_memory_bytes" in options:
            raise ValueError("give the host RAM once: --host-memory or -o host_memory_bytes=..., not both")
        options["host_memory_bytes"] = host_bytes
    result = fit(model, gpu=args.gpu, num_gpus=args.num_gpus, tp=args.tp, pp=args.pp,
                 context=args.context, batch=args.batch, weight_dtype=args.weight_dtype,
                 kv_dtype=args.kv_dtype, engine=args.engine,
                 gpu_memory_utilization=args.gpu_memory_utilization, **options)
    error = result.why_not if result.max_batch == 0 else None     # not one sequence: said on stderr too
    most = ("not one sequence" if result.max_batch == 0 else
            f"up to {result.max_batch:,} sequence{'s' * (result.max_batch != 1)}")
    workload = (f"{result.context:,} tokens x batch {result.batch}" if result.batch is not None else
                f"{result.context:,} tokens, {most} (no --batch given)")
    replica = " per replica" if result.replicas > 1 else ""
    lines = [f"{result.model} on {result.num_gpus} x {result.gpu} · {result.engine} · tp {result.tp} pp {result.pp}"
             f" · weights {result.weight_dtype} · KV {result.kv_dtype}",
             f"fits: {'yes' if result.fits else 'no'}{_condition(result)} — {workload}",
             f"per device, for {result.breakdown_batch:,} x {result.breakdown_context:,} tokens{replica}: "
             + _breakdown_text(result),
             f"max batch at {result.context:,} tokens: {result.max_batch}",
             f"max context at batch {result.batch or 1}: {result.max_context:,}",
             f"min GPUs: {result.min_gpus if result.min_gpus is not None else 'none up to tp 64'}"]
    if result.decode_text is not None:
        lines.append(f"decode bound: {result.decode_text}")
    if result.kv_crossover_tokens is not None:
        lines.append(f"KV reads pass weight reads from {result.kv_crossover_tokens:,} tokens per sequence")
    lines += engine_numbers_lines(result.engine_numbers)
    lines += host_lines(result.host)
    if not result.fits and error is None:      # the fit's own words (Fit.why_not), as the app and the report say it
        lines.append(result.why_not)
    if result.levers and any(lever.plan_refused is None for lever in result.levers):
        lines.append("would fit, as flags: " + "; ".join(lever_flags(lever.change) for lever in result.levers
                                                         if lever.plan_refused is None))
    lines += [f"note: {note}" for note in result.notes]
    data = result.to_dict()
    data["weights_source"] = (result.weight_dtype if result.weight_dtype in ("safetensors", "gguf", "given")
                              else "formula")
    lines.insert(3, _weights_line(result))
    if offload:     # the placement first: the verdict above is its verdict (kvmem.engines.llamacpp.verdict)
        more, data["llamacpp_offload"] = _offload_lines(model, args)
        from ..sizing.setup import Given
        given = Given.of(options)
        measured = given.weights_bytes is not None or given.activation_bytes is not None
        if "error" in data["llamacpp_offload"] and not measured:
            # refused (a layout it cannot place): the refusal, exit 2, as on mixed cards, whatever the count; with
            # byte counts given the verdict places nothing (every layer on the GPUs, verdict.py), the note says so
            raise ValueError(data["llamacpp_offload"]["error"])
        lines[2:2] = more
    if error:
        data["error"] = error
        if not args.json:
            print(f"kvmem fit: {error}", file=sys.stderr)
    emit(data, args.json, lines)
    refused = engine_refusal(result, "fit")
    return 0 if result.fits and not refused else 1


def configure(fitp) -> None:
    add_fit_arguments(fitp)
    engine = fitp._option_string_actions["--engine"]
    engine.help += '; "all" or a list such as vllm,sglang compares them side by side (kvmem compare)'
    fitp.add_argument("--host-memory", default=None,
                      help="the host: its RAM per node, a budget like GPU memory ('512GiB', or a node: "
                           "dgx-h100, dgx-a100-640gb, ...; a plan that pins or maps more is refused, naming the "
                           "term), and/or, for llama.cpp's decode bound, its RAM bandwidth (a preset: ddr5-5600-2ch, "
                           "epyc-9004-12ch-ddr5-4800, ... or '89.6GB/s'); both as 'ddr5-5600-2ch,128GiB'. "
                           "--gpu A,B gives mixed cards")
    add_llama_args(fitp)
    fitp.set_defaults(func=cmd_fit)


def add_llama_args(parser) -> None:
    """--llama-args: the user's own llama-server flags (kvmem fit and kvmem plan)."""
    parser.add_argument("--llama-args", default=None, metavar="FLAGS",
                        help='llama.cpp: YOUR llama-server flags, e.g. "-ngl 99 -ts 3,1 --n-cpu-moe 30" (read as '
                             "check-log reads a command; at most 2,000 characters, never run): whether they fit, "
                             "per device, the largest batch and context they hold, what --fit on and kvmem's "
                             "placement do instead, and the lines llama.cpp would print; write "
                             '--llama-args="-ot ..." where they start with -o (kvmem\'s own -o)')
