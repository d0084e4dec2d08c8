"""The llama-server command kvmem.plan writes, given to llama.cpp itself (issue #21 item 6).

For 50 seeded random fits of presets the GGUF writer knows (kvmem.oracles.llamacpp), the command's
-c, -np, -ub, -fa, -ctk, -ctv, --swa-full and --kv-unified become llama.cpp's context parameters
(vendored by llama-cpp-python 0.3.36): llama.cpp must print exactly the cache lines the plan
predicts (Plan.fit.engine_numbers.lines).
"""

import random

from tests.oracles.conftest import require

require("llama_cpp")

import kvmem  # noqa: E402
from kvmem import PlanRefused  # noqa: E402
from kvmem.oracles import llamacpp as oracle  # noqa: E402

CASES = 50
VALUED = {"-c": "n_ctx", "-np": "n_seq", "-ub": "n_ubatch", "-ctk": "type_k", "-ctv": "type_v"}
# where the weights go (the placement kvmem's verdict chose), which the cache lines do not depend on
PLACEMENT = ("-m", "-ngl", "--fit", "--n-cpu-moe", "-ot", "-ts", "-sm", "-mg")


def setting_of(argv: list[str]) -> dict:
    """llama-server's flags, read as llama.cpp's common/arg.cpp reads them, as context parameters."""
    assert argv[0] == "llama-server"
    s = {"swa_full": False, "kv_unified": False}
    i = 1
    while i < len(argv):
        flag = argv[i]
        if flag in ("--swa-full", "--kv-unified"):
            s[flag[2:].replace("-", "_")] = True
            i += 1
            continue
        value = argv[i + 1]
        if flag in VALUED:
            s[VALUED[flag]] = int(value) if flag in ("-c", "-np", "-ub") else value
        elif flag == "-fa":
            s["flash_attn"] = {"on": True, "off": False, "auto": "auto"}[value]
        else:
            assert flag in PLACEMENT, f"a flag llama.cpp's context does not take here: {flag}"
        i += 2
    return s


def test_llama_cpp_prints_the_lines_the_plan_predicts():
    names = [n for n in kvmem.list_models() if oracle._supported(kvmem.get_model(n))]
    rng = random.Random(36)
    done = refused = 0
    while done < CASES:
        name = rng.choice(names)
        kwargs = dict(gpu=rng.choice(["rtx-4090-24gb", "h100-sxm-80gb", "a100-sxm-80gb"]),
                      context=rng.choice([2048, 4096, 8192, 32768]), batch=rng.choice([1, 2, 3, 4]),
                      kv_dtype=rng.choice(["f16", "q8_0", "q4_0", "bf16"]), engine="llama.cpp",
                      target=rng.choice(["workload", "max_batch", "max_context"]))
        try:
            plan = kvmem.plan(name, **kwargs)
        except (PlanRefused, ValueError):
            refused += 1
            assert refused < 20 * CASES
            continue
        if plan.batch > 16:     # a llama.cpp context of hundreds of sequences: many seconds each, same rule
            continue
        setting = setting_of(plan.argv)
        checks = oracle.run_case(f"plan-{name}", kvmem.get_model(name), setting)
        bad = [c for c in checks if not c.matches]
        assert not bad, (plan.command, [(c.quantity, c.kvmem, c.engine) for c in bad])
        lines = [c for c in checks if c.quantity == "cache lines"][0].engine
        assert [line for line in lines if "size =" in line] == \
            [line for line in plan.fit.engine_numbers.lines if "size =" in line], plan.command
        done += 1
