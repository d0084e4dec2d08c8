#!/usr/bin/env bash
# Fetch, here, the wheels tools/cuda_validate.sh installs on the GPU machine (which has no network
# and transformers 5.17, hqq and optimum-quanto not at all): kvmem's pins, into build/cuda-wheels
# (ignored by git). Then carry "build/cuda-wheels" in the device run.
set -eu
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${KVMEM_PYTHON:-$REPO/.venv/bin/python}
mkdir -p "$REPO/build/cuda-wheels"
# hqq needs termcolor (not on that machine); its other needs and transformers' are there
"$PY" -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform any \
  -d "$REPO/build/cuda-wheels" transformers==5.24.0 optimum-quanto==0.2.7 termcolor
# hqq publishes a source distribution only: build its (pure-Python) wheel here
"$PY" -m pip wheel --no-deps -w "$REPO/build/cuda-wheels" hqq==0.2.8.post1
ls -l "$REPO/build/cuda-wheels"
