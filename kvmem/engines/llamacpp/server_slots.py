"""llama-server's slots at the user's own flags (own_flags): what a -c and -np hold as given, and the --target answer
that says which -c (and -np) the largest workloads of their placement need."""

from __future__ import annotations

__all__ = ["held", "raised_words", "target_answer"]


def held(n_ctx: int, n_seq: int, kv_unified: bool, context: int, n_ctx_train) -> tuple:
    """(sequences of ``context`` tokens the KV pool holds at once, the longest context a sequence gets) with -c
    ``n_ctx`` and -np ``n_seq`` as given, nothing raised. llama.cpp@0c1e57098 src/llama-context.cpp#L289-L306: n_ctx
    padded to 256; one unified pool gives each slot all n_ctx cells, separate streams n_ctx / n_seq (padded to 256);
    llama-server caps a slot at the model's training context (tools/server/server-context.cpp#L4007-L4016
    n_ctx_slot)."""
    n_ctx = -(-n_ctx // 256) * 256
    slot = n_ctx if kv_unified else -(-(n_ctx // n_seq) // 256) * 256
    if n_ctx_train:
        slot = min(slot, n_ctx_train)
    if slot < context:
        return 0, slot
    return (min(n_seq, n_ctx // context) if kv_unified else n_seq), slot


def target_answer(got, target: str) -> str:
    """kvmem plan --target max_batch | max_context with the flags ``got`` (own_flags.OwnFlags): the workload their
    placement holds, the -c (and -np) it needs, and what to give kvmem plan for it (kvmem writes -c = --context x
    the sequences where the flags give none: own_flags_read.workload)."""
    need = got.raised[target]
    c = (f" (kvmem then writes -c {need['n_ctx']})" if "n_ctx" not in got.settings else
         f" and -c {need['n_ctx']} among your flags")
    if target == "max_batch":
        holds = f"{got.max_batch} sequences of {got.context:,} tokens with -c raised to {need['n_ctx']:,}"
        # one pool: --batch sets the sequences; with no -np kvmem would give --batch's count as -np (separate pools)
        slots = "" if "n_seq" in got.settings else f" and -np {need['n_seq']} -kvu among your flags"
        give = (f"--batch {got.max_batch}{slots}" if got.kv_unified else f"-np {need['n_seq']} among your flags") + c
    else:
        holds = f"{got.max_context:,} tokens a sequence at batch {got.batch} with -c raised to {need['n_ctx']:,}"
        give = f"--context {got.max_context}" + c
    return (f"{holds} (your -c {got.n_ctx:,} holds {got.pool_sequences} sequence{'s' * (got.pool_sequences != 1)} "
            f"of {got.context:,} tokens, each up to {got.slot_context:,}): give {give}")


def raised_words(got, what: str) -> str:
    """The -c (and -np) ``what`` (max_batch, max_context) needs at the flags ``got``, said as a change of the flags'
    own where it is one."""
    need = got.raised[what]
    if not need["n_ctx"]:
        return "none runs"
    if (need["n_ctx"], need["n_seq"]) == (got.n_ctx, got.n_seq):
        return "with your -c"
    return f"with -c raised to {need['n_ctx']:,}" + (f" and -np {need['n_seq']}" if need["n_seq"] != got.n_seq else "")
