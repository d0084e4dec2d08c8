# Two commands do everything on a fresh machine:
#   make run    create .venv if missing, install the pinned requirements, start the app on 127.0.0.1:8501
#   make test   the same environment and .venv-oracles, ruff, the whole test suite (mypy's ratchet,
#               tests/test_typecheck.py, among it), then tests/oracles again with the engines installed
#               (what .ci/run calls)
#   make test-fast  ruff and the tests but the browser and slow ones (-m slow: mypy, measurement threads,
#               the seeded fuzz), in parallel (pytest-xdist): the inner loop
#   make typecheck  mypy kvmem alone
#   make oracles  .venv-oracles: vLLM, SGLang, llama.cpp (llama-cpp-python) and kvmem, the engines
#               whose own code judges kvmem (requirements-oracles.txt; once 25-35 min, then instant)
#   make fuzz   the seeded fuzz (tests/fuzz/test_fuzz_seeded.py) with a fresh seed, printed, and
#               FUZZ_CALLS calls (default 200000); again with the same calls: make fuzz FUZZ_SEED=<seed>
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
ORACLES := .venv-oracles
ORACLES_STAMP := $(ORACLES)/.installed

.PHONY: run test test-fast lint typecheck bench clean oracles fuzz

# pip shows what it collects and downloads: a fresh clone installs for a few minutes, and says so
$(STAMP): requirements.txt pyproject.toml
	@echo "==> $(VENV): installing requirements.txt (a fresh clone takes a few minutes; pip's progress follows)"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --progress-bar on -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)
	@echo "==> $(VENV) ready"

run: $(STAMP)
	$(BIN)/streamlit run app.py --server.address 127.0.0.1 --server.port 8501 \
		--server.headless true --browser.gatherUsageStats false --server.fileWatcherType none

lint: $(STAMP)
	$(BIN)/ruff check .

test: lint $(ORACLES_STAMP)
	$(BIN)/python -m pytest
	$(ORACLES)/bin/python -m pytest -p no:cacheprovider -p no:faulthandler tests/oracles

$(ORACLES_STAMP): requirements-oracles.txt pyproject.toml
	@echo "==> $(ORACLES): installing the engines (once 25-35 min: llama-cpp-python compiles; pip's progress follows)"
	test -x $(ORACLES)/bin/python || $(PYTHON) -m venv $(ORACLES)
	$(ORACLES)/bin/python -m pip install --progress-bar on --no-deps -r requirements-oracles.txt
	$(ORACLES)/bin/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(ORACLES_STAMP)

oracles: $(ORACLES_STAMP)

test-fast: lint
	$(BIN)/python -m pytest -q -m "not browser and not slow" -n auto

typecheck: $(STAMP)
	$(BIN)/python -m mypy kvmem

FUZZ_CALLS ?= 200000
FUZZ_SEED ?=
fuzz: $(STAMP)
	@seed="$(FUZZ_SEED)"; [ -n "$$seed" ] || seed=$$($(BIN)/python -c "import secrets; print(secrets.randbelow(2**32))"); \
	echo "==> kvmem fuzz: seed $$seed, $(FUZZ_CALLS) calls (the same again: make fuzz FUZZ_SEED=$$seed)"; \
	KVMEM_FUZZ_SEED=$$seed KVMEM_FUZZ_CALLS=$(FUZZ_CALLS) $(BIN)/python -m pytest -q -p no:cacheprovider -n auto \
		tests/fuzz/test_fuzz_seeded.py

bench: $(STAMP)
	$(BIN)/python bench/app_latency.py
	$(BIN)/python bench/page_loads.py

clean:
	rm -rf $(VENV) $(ORACLES) .pytest_cache .hypothesis .mypy_cache
