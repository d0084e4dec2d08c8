"""The verdict's searches (kvmem.engines.llamacpp.verdict): the longest context and the most sequences a placement's
flags hold, by false position on the room left (longest, longest_context; most_sequences over the counts llama.cpp
creates a context for, most_creatable, sequence_counts, with what else it refuses, refusal), what --fit on's flags
hold (or_fit_on), and kvmem's own searches past it (beyond)."""

from __future__ import annotations

__all__ = ["PAD", "beyond", "longest", "longest_context", "most_creatable", "most_sequences", "or_fit_on",
           "refusal", "sequence_counts"]

PAD = 256          # src/llama-kv-cache.cpp: cells per stream padded to 256


def longest_context(context: int, fits, room, caps: tuple, room_asked: int) -> int:
    """The longest context (tokens, at most the cap) a placement's flags hold, searched in 256-cell units: ``fits(u)``,
    ``room(u)`` (the least room left where laid out), ``caps``: the units of the longest context, the first guess,
    the longest context; ``room_asked``: the room left at the context asked."""
    units, guess, context_cap = caps
    if context >= PAD:       # fits(1) taken (placement_verdict): the boundary by false position on the room left
        u = longest(fits, room, units, guess, (context / PAD, room_asked))
    else:
        from ...sizing.search import largest_fitting
        u = largest_fitting(fits, units, guess)
    return min(u * PAD, context_cap)


def beyond(known: int, past, search) -> int:
    """max(known, search()), search() the largest value a monotone 'fits' holds and ``past()`` whether it holds the
    least value past ``known`` (True also where that is not to be asked): where it does not, search() is at most
    ``known`` and is not run (kvmem's own searches past what --fit on's flags hold: one layout, not a search)."""
    return max(known, search()) if past() else known


def or_fit_on(s, placer, tensors, best, batch: int, caps: tuple) -> tuple:
    """(most, longest, --fit on's placement): the most sequences of ``s.context`` and the longest context at
    ``batch`` --fit on's flags hold, where they differ from those of kvmem's placement ``best`` and hold the
    workload: on several GPUs (one GPU's placement is not fit's search), where kvmem's keeps layers or experts in
    host RAM (a placement of every layer on the GPUs answers for itself, the same at every context asked:
    tests/engines/test_llamacpp_fit_one_model.py); (0, 0, None) elsewhere. ``caps``: the sequence cap, the 256-cell
    units of the longest context, those of the context asked, the longest context."""
    from .fitting import layout
    whole = (best.placement.offloaded_layers == best.placement.layers_total and not best.n_cpu_moe
             and not best.override_tensor)
    alt = placer.by_fit(batch) if len(placer.budgets) > 1 and not whole else None
    if alt is None or not placer.holds(alt) or placer.flags_of(alt) == placer.flags_of(best):
        return 0, 0, None
    alt_flags = placer.flags_of(alt)
    seq_cap, units, cells, context_cap = caps
    rooms: dict = {(s.context, batch): placer.room(alt)}    # (context, seqs) -> the least room left (None: refused)

    def room(context: int, seqs: int):
        if (context, seqs) not in rooms:
            try:
                rooms[context, seqs] = placer.room(layout(s.model, tensors, **alt_flags, **placer.kw,
                                                          n_ctx=context * seqs, n_seq=seqs))
            except ValueError:
                rooms[context, seqs] = None
        return rooms[context, seqs]

    def fits(context: int, seqs: int) -> bool:
        left = room(context, seqs)
        return left is not None and left >= 0

    # first guesses from the bytes, as the verdict's own searches: the tightest GPU's slack over its KV
    dict_budgets = dict(placer.budgets)
    holding = [(dict_budgets[n] - alt.total_bytes[n], alt.placement.device(n).kv_bytes) for n in dict_budgets]
    holding = [(slack, kv) for slack, kv in holding if kv > 0] or [(0, 1)]
    most = most_creatable(sequence_counts(s.model, s.context, placer.kw, seq_cap), lambda b: fits(s.context, b),
                          lambda b: rooms.get((s.context, b)),
                          refusal(s.model, tensors, {**alt_flags, **placer.kw}, s.context),
                          (seq_cap, batch + min(slack * batch // kv for slack, kv in holding)),
                          (batch, rooms[s.context, batch]))
    guess = cells + min(slack * cells // kv for slack, kv in holding)
    top = longest_context(s.context, lambda u: fits(min(u * PAD, context_cap), batch),
                          lambda u: rooms.get((min(u * PAD, context_cap), batch)), (units, guess, context_cap),
                          rooms[s.context, batch])
    return most, top, alt


def refusal(model, tensors, flags: dict, context: int):
    """b -> whether llama.cpp refuses b sequences of ``context`` tokens with ``flags`` (layouts.layout's ValueError),
    asked without scheduling a graph (schedule=False, ~0.2 ms): the refusals that depend on the sequences (the stream
    counts, LLAMA_MAX_SEQ, -c past an int) are the settings' and the plan's, checked before any graph is built.
    None (not asked: most_sequences is then largest_fitting itself) where no layer is on a GPU."""
    from .layouts import layout
    if not flags["n_gpu_layers"]:       # -ngl 0: the sketch would size the host's whole graph, 0.16-0.29 s (Kimi-K3)
        return None

    def refused(seqs: int) -> bool:
        try:
            layout(model, tensors, **flags, n_ctx=context * seqs, n_seq=seqs, schedule=False)
        except ValueError:
            return True
        return False
    return refused


def most_sequences(fits, room, refused, caps: tuple, anchor: tuple) -> int:
    """largest_fitting(fits, cap, guess)'s answer, ``caps`` (cap, guess), with the same probes answered, most without
    laying them out: ``fits(b)`` is 'b sequences are not refused and leave room' (``refused(b)``: llama.cpp refuses b
    sequences, asked without a graph; ``room(b)``: the least room left where b was laid out, else None), the room
    falling with b. A probe refused is False (a count the settings or the plan refuse; 'fits' need not be monotone
    there, and largest_fitting's own probes are what its answer rests on: most_creatable leaves out beforehand the
    stream counts kimi-linear and minimax-01 abort on); one
    inside the bracket of rooms laid out (the last b with room >= 0, ``anchor`` (b, room) to start, the first b
    with room < 0) is settled by laying out the false position on the rooms instead (the room is near linear in b:
    KV, the mask, the compute buffer), where largest_fitting's gallop from a linear guess off by 4x (gemma-3n-e4b on
    4 GPUs: guess 162, answer 40) lays out 14 probes; two on the same side in a row halve the bracket instead."""
    from ...sizing.search import largest_fitting
    cap, guess = caps
    if refused is None:     # refusals not asked (no layer on a GPU: a sketch would size the host's whole graph)
        return largest_fitting(fits, cap, guess)
    below, above, points = anchor[0], cap + 1, [anchor]
    sides: list[bool] = []

    def settled(b: int) -> bool:
        nonlocal below, above
        if refused(b):
            return False
        while below < b < above:
            if len(points) < 2:
                u = b
            elif len(sides) > 2 and sides[-1] == sides[-2]:
                u = (below + above) // 2
            else:
                u = _secant(points, above - 1)
            u = min(max(u, below + 1), above - 1)
            if u != b and refused(u):
                u = b
            ok, left = fits(u), room(u)
            if left is None:        # not laid out (known not to fit beforehand) or refused while laid out
                return ok if u == b else fits(b)
            points.append((u, left))
            sides.append(ok)
            below, above = (u, above) if ok else (below, u)
        return b <= below

    return largest_fitting(settled, cap, guess)


def sequence_counts(model, context: int, kw: dict, cap: int) -> tuple:
    """The sequence counts 1..cap of ``context`` tokens each whose context llama.cpp creates with the cache settings
    ``kw`` (streams.creatable_streams; the reserve's tokens min(n_ctx, n_ubatch), n_ctx padded to 256 cells and
    n_ubatch at most n_batch: src/llama-context.cpp). A candidate list: each count asked is still laid out."""
    from ...units import pad
    from .streams import creatable_streams
    n_ubatch = min(kw.get("n_ubatch") or 512, kw.get("n_batch") or 2048)
    return creatable_streams(model, cap, bool(kw.get("kv_unified")), lambda n_seq: min(pad(context * n_seq, 256),
                                                                                          n_ubatch))


def most_creatable(counts: tuple, fits, room, refused, caps: tuple, anchor: tuple) -> int:
    """most_sequences over ``counts``, the sequence counts 1..cap llama.cpp creates a context for
    (streams.creatable_streams): the most of them that fits. Where a count between is one llama.cpp aborts on
    (kimi-linear and minimax-01 with a stream per sequence: the divisors of the reserve's tokens), 'fits' is not
    monotone in b but is in the creatable counts (the room falls as they grow), so the search asks those alone: 128
    sequences fit a Kimi-Linear-48B on 4 x rtx-3090-24gb at 32k where a search over every count stopped at 2 (3
    aborts). With every count creatable, most_sequences itself (the same probes)."""
    cap, guess = caps
    if counts == tuple(range(1, cap + 1)):
        return most_sequences(fits, room, refused, caps, anchor)

    def of(i: int) -> int:
        return counts[i - 1]

    def upto(b: int) -> int:        # the position of the last count <= b
        return sum(1 for c in counts if c <= b)
    # the anchor (the sequences the placement holds: laid out, so creatable) and the guess, as positions
    found = most_sequences(lambda i: fits(of(i)), lambda i: room(of(i)), refused and (lambda i: refused(of(i))),
                           (len(counts), max(upto(guess), 1)), (upto(anchor[0]), anchor[1]))
    return of(found) if found else 0


def longest(fits, room, cap: int, guess: int, anchor: tuple) -> int:
    """largest_fitting's answer for a monotone ``fits`` known true at 1 (the largest u in 1..cap with fits(u)),
    its first two probes (the guess, then one unit past it or short of it), then false position: ``room(u)``,
    the least room left where u was laid out (None where it was not), is near linear in u (KV, the mask), so
    the line through the last two rooms (or ``anchor``, (u, room) known) lands next to the boundary where a
    guess a few percent off gallops for a dozen layouts. Every probe is inside the bracket (lo fits, hi does
    not or is past cap), so it ends; two false-position probes the same side in a row halve it instead, and where the
    rooms give no line (all the same), or the half is further than twice the last move of that side, that side steps
    out twice as far as it last moved: a bracket that still reaches the cap (a million tokens) is not halved into a
    context hundreds of thousands of cells away (DeepSeek-V4-Flash on one 3090: 11 -> 7 probes)."""
    lo, hi, u, sides, points = 1, cap + 1, min(max(guess, 1), cap), [], [anchor]
    while hi - lo > 1:
        ok = fits(u)
        moved = u - lo if ok else hi - u
        lo, hi = (u, hi) if ok else (lo, u)
        sides.append(ok)
        if room(u) is not None:
            points.append((u, room(u)))
        step = lo + 2 * moved if ok else hi - 2 * moved
        if len(sides) == 1:
            u = lo + 1 if ok else hi - 1
        elif len(sides) > 3 and sides[-1] == sides[-2]:
            u = min((lo + hi) // 2, step) if ok else max((lo + hi) // 2, step)
        else:
            u = _secant(points, step)
        u = min(max(u, lo + 1), hi - 1)
    return lo


def _secant(points: list, flat: int) -> int:
    """The false position through the last (u, room) of ``points`` and the latest one before it with another room
    (the room is flat over a few units where the cache grows in steps: DeepSeek-V4's compressed caches every 4 or 128
    units, so two probes a unit apart can leave the same room, and the line through them says nothing); ``flat`` where
    every room laid out is the same."""
    u1, r1 = points[-1]
    for u0, r0 in reversed(points[:-1]):
        if r0 != r1:
            return int(u1 + (u1 - u0) * r1 / (r0 - r1))
    return flat
