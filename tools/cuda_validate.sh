#!/usr/bin/env bash
# kvmem's predictions against torch.cuda's allocator, on a GPU machine (issue 25).
#
#   bash tools/cuda_validate.sh                        # on a CUDA machine: writes $OUT/cuda_report.json, $OUT/cuda.md
#   KVMEM_CUDA_DEVICE=cpu bash tools/cuda_validate.sh  # the CPU dry run: same phases at reduced sizes
#
# Phases, one process each under its own time limit (a phase that hangs costs only itself; the
# report names it): machine, the whole suite (`python3 -m kvmem validate --device cuda --json`),
# the KV formats, the seed's experiment (LLaMA-2-7B shapes, b=32, t=500, fp16), the 128k-token
# long-context point, then the report. About 2-3 minutes on an H200; at most KVMEM_CUDA_BUDGET
# seconds (default 540) in all.
#
# Uses the machine's python3 (KVMEM_PYTHON to override) with PYTHONPATH set to the repository:
# kvmem's core is stdlib only, the phases need torch and transformers. Wheels under
# build/cuda-wheels (tools/cuda_wheels.sh fetches kvmem's pins: transformers 5.24.0, hqq,
# optimum-quanto) are installed under /tmp first when present; carry that folder to the device.
# optimum-quanto goes on the path of the formats phase only: its CUDA kernels compile on first use.
set -u
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$(mktemp -d /tmp/kvmem-cuda.XXXXXX)}
mkdir -p "$OUT"
PY=${KVMEM_PYTHON:-python3}
DEVICE=${KVMEM_CUDA_DEVICE:-cuda}
BUDGET=${KVMEM_CUDA_BUDGET:-540}
DRY=()
SUITE_ARGS=()
if [ "$DEVICE" = cpu ]; then DRY=(--dry); SUITE_ARGS=(--quick); fi
# KVMEM_CUDA_SUITE_MODELS="gpt2 llama-3.1-8b": only these models' suite entries (the tests' dry run);
# KVMEM_CUDA_SKIP_BACKENDS=quanto: formats and long phases leave that backend out
# shellcheck disable=SC2206
[ -n "${KVMEM_CUDA_SUITE_MODELS:-}" ] && SUITE_ARGS+=(--models ${KVMEM_CUDA_SUITE_MODELS})
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} MAX_JOBS=${MAX_JOBS:-16}
LOG="$OUT/cuda_validate.log"
: >"$LOG"
say() { echo "[cuda_validate ${SECONDS}s] $*" | tee -a "$LOG" >&2; }

BASE_PATH="$REPO"
QUANTO_PATH=""
WHEELS="$REPO/build/cuda-wheels"
if compgen -G "$WHEELS/*.whl" >/dev/null; then
  SITE=/tmp/kvmem-site QSITE=/tmp/kvmem-quanto
  rm -rf "$SITE" "$QSITE"
  others=(); quanto=()
  for w in "$WHEELS"/*.whl; do
    case "$(basename "$w")" in optimum_quanto-*) quanto+=("$w") ;; *) others+=("$w") ;; esac
  done
  if [ ${#others[@]} -gt 0 ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" "${others[@]}" >>"$LOG" 2>&1 \
      && BASE_PATH="$REPO:$SITE" || say "installing ${others[*]} failed (see the log); using the machine's packages"
  fi
  if [ ${#quanto[@]} -gt 0 ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$QSITE" "${quanto[@]}" >>"$LOG" 2>&1 \
      && QUANTO_PATH="$QSITE" || say "installing optimum-quanto failed (see the log)"
  fi
fi
say "out=$OUT device=$DEVICE python=$PY path=$BASE_PATH quanto=${QUANTO_PATH:-none}"

STATUS=()
phase() {  # phase NAME LIMIT PYTHONPATH OUTFILE COMMAND...
  local name=$1 limit=$2 path=$3 outfile=$4; shift 4
  local left=$((BUDGET - SECONDS - 15))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 5 ]; then say "$name: no time left"; STATUS+=(--status "$name=no-time"); return; fi
  say "$name: start (limit ${limit}s)"
  if [ -n "$outfile" ]; then
    PYTHONPATH="$path" timeout -k 10 "$limit" "$@" >"$outfile" 2>>"$LOG"
  else
    PYTHONPATH="$path" timeout -k 10 "$limit" "$@" >>"$LOG" 2>&1
  fi
  local rc=$?
  say "$name: exit $rc"
  STATUS+=(--status "$name=$rc")
}

REPORT=("$PY" -m kvmem.measurement.cuda_report)
phase machine 60 "$BASE_PATH" "" "${REPORT[@]}" machine --device "$DEVICE" --out "$OUT" "${DRY[@]}"
# the whole suite, as the CLI runs it (exit 1 = a mismatch; the JSON holds every row either way)
phase suite 150 "$BASE_PATH" "$OUT/validate.json" "$PY" -m kvmem validate --device "$DEVICE" --json "${SUITE_ARGS[@]}"
phase formats 120 "$BASE_PATH${QUANTO_PATH:+:$QUANTO_PATH}" "" \
  "${REPORT[@]}" formats --device "$DEVICE" --out "$OUT" "${DRY[@]}"
phase seed 150 "$BASE_PATH" "" "${REPORT[@]}" seed --device "$DEVICE" --out "$OUT" "${DRY[@]}"
phase long 90 "$BASE_PATH" "" "${REPORT[@]}" long --device "$DEVICE" --out "$OUT" "${DRY[@]}"
PYTHONPATH="$BASE_PATH" "${REPORT[@]}" report --out "$OUT" "${DRY[@]}" "${STATUS[@]}" 2>&1 | tee -a "$LOG"
say "done: $OUT/cuda_report.json, $OUT/cuda.md"
