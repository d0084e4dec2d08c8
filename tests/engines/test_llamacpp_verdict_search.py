"""The verdict's longest-context search (verdict_search.longest): the same answer as largest_fitting for every
monotone 'fits', in fewer probes where the guess is off."""

from __future__ import annotations

import random

from kvmem.engines.llamacpp.verdict_search import longest as _longest
from kvmem.engines.llamacpp.verdict_search import most_creatable, most_sequences
from kvmem.sizing.search import largest_fitting


def _case(rng: random.Random):
    """A room that falls near linearly with u (KV per unit, a compute buffer growing in steps), the u it
    crosses 0 at, and a guess off by up to 30 % either way; fits(u) is room(u) >= 0, true at 1."""
    cap = rng.choice([16, 128, 512, 1024, 4096])
    per_unit, start = rng.randint(1, 10**6), rng.randint(0, 10**9)
    steps = sorted(rng.sample(range(1, cap + 1), min(cap, 5)))
    jump = rng.randint(0, 3 * per_unit)

    def room(u):
        return start - per_unit * u - jump * sum(u >= s for s in steps)
    if room(1) < 0:
        return None
    boundary = largest_fitting(lambda u: room(u) >= 0, cap)
    guess = max(1, int(boundary * rng.uniform(0.7, 1.3)) + rng.randint(-2, 2))
    return cap, room, guess


def test_the_same_answer_as_largest_fitting_in_no_more_probes_for_a_close_guess():
    """2,000 seeded cases: _longest finds largest_fitting's u; where the guess is within one unit of it,
    at most largest_fitting's probes; over all cases fewer probes in total."""
    rng = random.Random(34)
    ours = theirs = 0
    for _ in range(2000):
        case = _case(rng)
        if case is None:
            continue
        cap, room, guess = case
        seen: dict = {}

        def fits(u, seen=seen, room=room):
            seen[u] = room(u)
            return seen[u] >= 0
        got = _longest(fits, seen.get, cap, guess, (1, room(1)))
        probes: list = []
        want = largest_fitting(lambda u, room=room, probes=probes: probes.append(u) or room(u) >= 0, cap, guess)
        assert got == want, (cap, guess)
        if abs(guess - want) <= 1:
            assert len(seen) <= len(probes) - 1     # largest_fitting's fits(1) is known here
        ours, theirs = ours + len(seen), theirs + len(probes) - 1
    assert ours < theirs * 0.7, (ours, theirs)


def test_most_sequences_answers_as_largest_fitting_also_where_refusals_break_monotony():
    """2,000 seeded cases of a room falling with the sequences (a guess off by up to 4x, as gemma-3n-e4b's) and,
    in two thirds of them, stream counts refused (kimi-linear's: those not dividing n_ubatch 512, or a random set):
    most_sequences gives largest_fitting's answer, laying out fewer than half its probes in total."""
    rng = random.Random(35)
    ours = theirs = 0
    for _ in range(2000):
        cap = rng.choice([4, 16, 64, 256])
        per_seq, start = rng.randint(1, 10**6), rng.randint(10**6, 10**9)
        grows = rng.randint(0, per_seq)         # a compute buffer growing with the sequences

        def room(b, per_seq=per_seq, start=start, grows=grows, cap=cap):
            return start - per_seq * b - grows * b * b // cap
        odd = set(rng.sample(range(2, cap + 1), rng.randint(0, cap - 1)))
        kind = rng.choice(["none", "divisors", "random"])
        refused = {"none": lambda b: False, "divisors": lambda b: 512 % b != 0,
                   "random": lambda b, odd=odd: b in odd}[kind]
        if room(1) < 0:
            continue
        top = largest_fitting(lambda b, room=room: room(b) >= 0, cap)
        guess = max(1, int(top * rng.uniform(0.25, 4)))
        anchor = rng.choice([b for b in range(1, top + 1) if not refused(b)] or [1])
        seen: dict = {}

        def fits(b, seen=seen, room=room, refused=refused):
            if refused(b):
                return False
            seen[b] = room(b)
            return seen[b] >= 0
        got = most_sequences(fits, seen.get, refused, (cap, guess), (anchor, room(anchor)))
        laid = len(seen)
        probes: list = []
        want = largest_fitting(lambda b, fits=fits, probes=probes: probes.append(b) or fits(b), cap, guess)
        assert got == want, (cap, guess, kind)
        ours, theirs = ours + laid, theirs + len({b for b in probes if not refused(b)})
    assert ours < theirs / 2, (ours, theirs)     # 1,952 against 5,259


def test_most_creatable_is_the_most_creatable_count_that_fits():
    """Over the counts llama.cpp creates (kimi-linear's divisors of n_ubatch 512, or every count), most_creatable
    answers the largest that leaves room, whatever counts between abort: 1,000 seeded rooms falling with the
    sequences, the answer checked by trying every count."""
    rng = random.Random(36)
    for _ in range(1000):
        cap = rng.choice([4, 16, 64, 256])
        per_seq, start = rng.randint(1, 10**6), rng.randint(10**6, 10**8)
        counts = rng.choice([tuple(range(1, cap + 1)), tuple(b for b in range(1, cap + 1) if 512 % b == 0)])
        seen: dict = {}

        def fits(b, seen=seen, per_seq=per_seq, start=start, counts=counts):
            if b not in counts:
                return False
            seen[b] = start - per_seq * b
            return seen[b] >= 0
        if not fits(1):
            continue
        want = max(b for b in counts if start - per_seq * b >= 0)
        guess = rng.randint(1, cap)
        got = most_creatable(counts, fits, seen.get, lambda b, counts=counts: b not in counts, (cap, guess),
                             (1, start - per_seq))
        assert got == want, (cap, guess, counts[-1])
        assert set(seen) <= set(counts)         # no count llama.cpp aborts on is laid out


def test_most_creatable_over_every_count_is_most_sequences():
    room = {b: 1000 - 70 * b for b in range(1, 17)}
    args = (lambda b: room[b] >= 0, room.get, lambda b: False, (16, 3), (1, room[1]))
    assert most_creatable(tuple(range(1, 17)), *args) == most_sequences(*args) == 14


def _flat_case(rng: random.Random):
    """A room that falls in steps every ``every`` units (DeepSeek-V4's compressed caches grow every 4 units of 256
    cells, the window's cache not at all), with the cap a million tokens away (4,096 units): rooms a unit apart are
    often equal."""
    cap, every, per_step = 4096, rng.choice([2, 4, 8]), rng.randint(10**5, 10**7)
    start = per_step * (rng.randint(16, 1000) // every) + rng.randrange(per_step)

    def room(u):
        return start - per_step * (u // every)
    boundary = largest_fitting(lambda u: room(u) >= 0, cap)
    guess = max(1, int(boundary * rng.uniform(0.7, 1.3)))
    return cap, room, guess, boundary


def test_flat_rooms_are_searched_near_the_boundary_not_across_the_cap():
    """500 seeded stepped rooms: the same answer as largest_fitting, and no probe past twice the boundary (each one a
    graph built at that context: the line through two equal rooms said 'the cap', and halving a bracket that reaches
    the cap laid out contexts of 1,000+ units where the answer was 180: DeepSeek-V4-Flash on one 3090, 11 probes)."""
    rng = random.Random(3434)
    for _ in range(500):
        cap, room, guess, boundary = _flat_case(rng)
        seen: dict = {}

        def fits(u, seen=seen, room=room):
            seen[u] = room(u)
            return seen[u] >= 0
        assert _longest(fits, seen.get, cap, guess, (1, room(1))) == boundary
        assert max(seen) <= 2 * boundary + 8, (guess, boundary, sorted(seen))
