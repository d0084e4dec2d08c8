# Two commands do everything on a fresh machine:
#   make run    create .venv if missing, install the pinned requirements, start the app on 127.0.0.1:8501
#   make test   the same environment, the whole test suite (what .ci/run calls)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test bench clean

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/streamlit run app.py --server.address 127.0.0.1 --server.port 8501 \
		--server.headless true --browser.gatherUsageStats false --server.fileWatcherType none

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python bench/app_latency.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
