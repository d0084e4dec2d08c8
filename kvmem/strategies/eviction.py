"""Eviction (token dropping): StreamingLLM, H2O and SnapKV caps, each with its paper's defaults.

The rules and their sources: kvmem.strategies (the package docstring).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..records import Record
from ..units import require_positive_int
from .inputs import count

EVICTION_POLICIES = ("streaming", "h2o", "snapkv")
_POLICY_ALIASES = {"streamingllm": "streaming", "sink": "streaming", "attention_sink": "streaming",
                   "heavy_hitter": "h2o", "h2o_eviction": "h2o"}
# Defaults, each from its paper (see the module docstring).
DEFAULT_SINK = 4                 # StreamingLLM §3.1: four initial tokens suffice
_DEFAULT_OBSERVATION_WINDOW = 32  # SnapKV §5.3: observation window size 32
_POLICY_FIELDS = {"streaming": ("sink", "window"), "h2o": ("budget", "recent"),
                  "snapkv": ("budget", "observation_window", "new_tokens")}
# Engines that share a prefix in whole blocks: the option naming their block, in tokens.


@dataclass(frozen=True)
class Eviction:
    """A token-eviction policy: ``Eviction("streaming", sink=4, window=1020)``,
    ``Eviction("h2o", budget=1024, recent=256)``, ``Eviction("snapkv", budget=1024)``."""

    policy: str
    sink: int | None = None
    window: int | None = None
    budget: int | None = None
    recent: int | None = None
    observation_window: int | None = None
    new_tokens: int | None = None

    def __post_init__(self):
        key = str(self.policy).strip().lower().replace("-", "_") if isinstance(self.policy, str) else None
        key = _POLICY_ALIASES.get(key, key)
        if key not in EVICTION_POLICIES:
            raise ValueError(f"unknown eviction policy {self.policy!r}; policies: {', '.join(EVICTION_POLICIES)}")
        given = [f for f in ("sink", "window", "budget", "recent", "observation_window", "new_tokens")
                 if getattr(self, f) is not None]
        stray = [f for f in given if f not in _POLICY_FIELDS[key]]
        if stray:
            raise ValueError(f"Eviction({key!r}) takes {', '.join(_POLICY_FIELDS[key])}, not {stray[0]}")
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731 (frozen)
        set_("policy", key)
        if key == "streaming":
            sink = count("sink", DEFAULT_SINK if self.sink is None else self.sink)
            if self.window is None:
                raise ValueError("Eviction('streaming') needs window= (recent tokens kept besides the sink)")
            window = count("window", self.window)
            if sink + window < 1:
                raise ValueError(f"sink + window must be at least 1 token, got {sink} + {window}")
            set_("sink", sink)
            set_("window", window)
            return
        if self.budget is None:
            raise ValueError(f"Eviction({key!r}) needs budget= (tokens kept per layer)")
        budget = count("budget", self.budget, minimum=1)
        set_("budget", budget)
        if key == "h2o":
            recent = count("recent", budget // 2 if self.recent is None else self.recent)
            if recent > budget:
                raise ValueError(f"recent must not exceed budget, got recent={recent} > budget={budget}")
            set_("recent", recent)
            return
        window = count("observation_window", min(_DEFAULT_OBSERVATION_WINDOW, budget)
                        if self.observation_window is None else self.observation_window, minimum=1)
        if window > budget:
            raise ValueError(f"observation_window must not exceed budget, got {window} > {budget}")
        set_("observation_window", window)
        set_("new_tokens", count("new_tokens", 0 if self.new_tokens is None else self.new_tokens))

    def _set(self, name: str) -> int:
        """A count __post_init__ set for this policy (its fields are ints from then on)."""
        value = getattr(self, name)
        if not isinstance(value, int):
            raise ValueError(f"Eviction({self.policy!r}) has no {name}")
        return value

    @property
    def cap(self) -> int | None:
        """The most tokens a layer holds, or None (SnapKV keeps every decoded token)."""
        if self.policy == "streaming":
            return self._set("sink") + self._set("window")
        return self._set("budget") if self.policy == "h2o" else None

    def held_tokens(self, tokens: int) -> int:
        """Tokens each full layer holds for a sequence of ``tokens`` under this policy."""
        tokens = require_positive_int("tokens", tokens)
        cap = self.cap
        if cap is None:     # snapkv
            new_tokens = self._set("new_tokens")
            if new_tokens > tokens:
                raise ValueError(f"new_tokens={new_tokens} exceeds tokens={tokens}")
            prompt = tokens - new_tokens
            return min(prompt, self._set("budget")) + new_tokens
        return min(tokens, cap)

    def describe(self) -> str:
        if self.policy == "streaming":
            return f"StreamingLLM: {self.sink} sink + {self.window} recent tokens"
        if self.policy == "h2o":
            budget, recent = self._set("budget"), self._set("recent")
            return f"H2O: {budget} tokens ({budget - recent} heavy hitters + {recent} recent)"
        return (f"SnapKV: prompt compressed to {self.budget} tokens (observation window "
                f"{self.observation_window}), {self.new_tokens} decoded tokens kept")

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class EvictionPolicies(Record):
    """eviction_policies: the seed's eviction families at one budget: ``.streaming`` and ``.h2o``,
    ``by_label()`` (label -> Eviction, None for "keep everything": what eviction_curves takes) and
    ``to_dict()`` (each policy by its label, as plain data)."""

    streaming: Eviction
    h2o: Eviction

    @property
    def keep(self) -> None:
        """The baseline beside them: nothing evicted."""
        return None

    def by_label(self) -> dict[str, Eviction | None]:
        """Each policy by the label its curve carries ("keep everything": None, nothing evicted)."""
        return {"keep everything": self.keep,
                f"StreamingLLM {self.streaming.sink} + {self.streaming.window}": self.streaming,
                f"H2O {self.h2o.budget}": self.h2o}

    def to_dict(self) -> dict:
        return {label: policy.to_dict() if policy else None for label, policy in self.by_label().items()}


def eviction_policies(budget: int, *, sink: int = 4) -> EvictionPolicies:
    """The seed's eviction families at one token budget, for side-by-side curves: nothing evicted,
    StreamingLLM (``sink`` sinks + the rest of the budget as the recent window) and H2O (half heavy
    hitters, half recent tokens)."""
    budget = count("budget", budget, minimum=1)
    window = max(budget - sink, 1)
    return EvictionPolicies(streaming=Eviction("streaming", sink=sink, window=window),
                            h2o=Eviction("h2o", budget=budget, recent=budget // 2))
