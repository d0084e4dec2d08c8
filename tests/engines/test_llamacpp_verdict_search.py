"""The verdict's longest-context search (verdict_search.longest): the same answer as largest_fitting for every
monotone 'fits', in fewer probes where the guess is off."""

from __future__ import annotations

import random

from kvmem.engines.llamacpp.verdict_search import longest as _longest
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
