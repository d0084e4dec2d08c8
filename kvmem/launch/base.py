"""What a launch plan is: flags with their reasons, the argv, files beside it, and the refusal."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from ..records import Record


class PlanRefused(ValueError):
    """No command: the workload does not fit, or a setting has no flag in that engine's release.
    ``.fit`` holds the Fit when sizing got that far (None otherwise)."""

    def __init__(self, message: str, fit=None):
        super().__init__(message)
        self.fit = fit


@dataclass(frozen=True)
class Flag(Record):
    """One argument of the command: its spelling, its value ("" for a switch) and why it is there."""

    flag: str           # "--max-model-len"; a positional argument has flag ""
    value: str
    reason: str

    @property
    def argv(self) -> list[str]:
        return [part for part in (self.flag, self.value) if part != ""]

    @property
    def shell(self) -> str:
        """The flag and its value as they read in the command line (quoted where they need it)."""
        return " ".join(shell_word(part) for part in self.argv)


def shell_word(part: str) -> str:
    """One argument as a shell word: shlex.quote, or, when it holds a character that does not
    print (a newline, an escape), bash/zsh's $'...' with each such character as an escape, so a
    command stays one line and a name never prints a raw control character."""
    if part.isprintable():
        return shlex.quote(part)
    out = []
    for char in part:
        code = ord(char)
        if char in "\\'":
            out.append("\\" + char)
        elif char.isprintable():
            out.append(char)
        else:
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "$'" + "".join(out) + "'"


def as_value(text: str) -> str:
    """A path argument no parser takes for an option: a name starting with "-" (a folder, a file or
    a config's _name_or_path named so) is written ./<name>, the same path. argparse (vLLM's
    positional model_tag, SGLang's --model-path) reads "--x" as a flag, and vLLM moves the value of
    --model=... to its positional (vllm@v0.33.0 vllm/utils/argparse_utils.py parse_args), so only a
    value that does not start with "-" is one everywhere."""
    return "./" + text if text.startswith("-") else text


@dataclass(frozen=True)
class Inputs:
    """What a command builder reads: the final Fit, its set-up, and the engine settings in force."""

    model: object                 # kvmem.Model
    fit: object                   # kvmem.Fit (it fits)
    setup: object                 # kvmem.sizing.setup.Setup
    options: dict                 # engine and sizing options as given
    defaults: dict                # the engine's device-dependent settings in force (engine_defaults)
    batch: int                    # sequences per replica the command admits


@dataclass(frozen=True)
class Plan:
    """A launch command for the pinned release of one engine, with every flag that realises a fit."""

    engine: str
    release: str                   # the engine release whose argument names the command uses
    program: tuple[str, ...]       # ("vllm", "serve"), ("python", "-m", "sglang.launch_server"), ...
    flags: tuple[Flag, ...]
    target: str                    # "workload", "max_batch" or "max_context"
    context: int                   # tokens per sequence the command allows
    batch: int                     # sequences the command admits (all replicas)
    fit: object = field(compare=False, default=None)     # the Fit it realises
    files: dict = field(default_factory=dict)            # file name -> text, written beside the command
    notes: tuple[str, ...] = ()

    @property
    def argv(self) -> list[str]:
        out = list(self.program)
        for f in self.flags:
            out += f.argv
        return out

    @property
    def command(self) -> str:
        """The command as one shell line (each argument quoted where it needs to be)."""
        return " ".join(shell_word(part) for part in self.argv)

    def to_dict(self) -> dict:
        return {"engine": self.engine, "release": self.release, "target": self.target, "context": self.context,
                "batch": self.batch, "argv": self.argv, "command": self.command,
                "flags": [f.to_dict() for f in self.flags], "files": dict(self.files), "notes": list(self.notes),
                "engine_numbers": self.fit.engine_numbers.to_dict() if self.fit and self.fit.engine_numbers else None}


def refuse_options(engine: str, options: dict, expressible: set, sizing_only: set) -> None:
    """A setting the command cannot carry is refused by name, never dropped."""
    for name, value in options.items():
        if name in expressible or name in sizing_only or value is None:
            continue
        raise PlanRefused(f"{engine}: kvmem has no launch flag for option {name}={value!r}; "
                          f"a command without it would not run the planned setup")


def model_argument(model) -> tuple[str, str]:
    """The model as the serving engines take it (an HF id), and why."""
    if model.hf_id:
        return as_value(model.hf_id), "the checkpoint kvmem sized (its Hugging Face id; a local path works too)"
    return as_value(model.name), "kvmem knows no Hugging Face id for this model: put its checkpoint's path here"


TORCH_DTYPE_FLAG = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}   # --dtype (vLLM and SGLang)


def weight_flags(engine: str, model, weights: str) -> list[Flag]:
    """--dtype or --quantization fp8 for the weight format planned (vLLM and SGLang read the rest
    from the checkpoint's config); a format the engine cannot make at load is refused by name."""
    if weights in ("given", "safetensors", model.dtype) or model.facts.quantization_config:
        return []
    from ..weights.formats import resolve_weight_dtype
    if weights == resolve_weight_dtype(model, "auto")[0]:    # the format the checkpoint is published in
        return []                                            # (DeepSeek-V3's block FP8): the engine reads it
    if weights in TORCH_DTYPE_FLAG:
        return [Flag("--dtype", TORCH_DTYPE_FLAG[weights], f"weights in {weights}, as planned "
                     f"(the checkpoint is {model.dtype})")]
    if weights == "fp8":
        return [Flag("--quantization", "fp8", f"weights planned in fp8: {engine} quantises the {model.dtype} "
                     "checkpoint at load")]
    raise PlanRefused(f"{engine}: weights planned as {weights!r} need a checkpoint already in that format "
                      f"({engine} reads it from the checkpoint's config); give that checkpoint instead of "
                      f"{model.name!r}")


def native_kv_dtype(engine: str, setup) -> str:
    """The KV format ``engine`` picks by itself for ``setup`` ("auto": the model's dtype as the engine
    resolves it); a plan in it needs no KV dtype flag."""
    from ..engines import engine_estimate
    return engine_estimate(setup.model, engine=engine, tokens=1, kv_dtype="auto", tp=setup.tp, pp=setup.pp,
                    **setup.engine_options).kv_dtype


def kv_dtype_value(engine: str, inp, table: dict, unknown: str) -> str:
    """The KV dtype flag's value for the fit's KV format: "auto" where the engine picks that format itself,
    else ``table``'s spelling; a format the table lacks is refused, ``unknown`` saying what the engine takes
    (formatted with ``name`` and ``auto``)."""
    name, auto = inp.fit.kv_dtype, native_kv_dtype(engine, inp.setup)
    if name == auto:
        return "auto"
    if name not in table:
        raise PlanRefused(unknown.format(name=repr(name), auto=auto))
    return table[name]

