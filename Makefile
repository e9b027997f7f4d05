# Two commands matter: `make run` (set up and start Hearth) and `make test` (set up and run
# every check). `make install` is the shared setup step both depend on.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# Python may cache compiled (and pytest's assert-rewritten) modules in __pycache__ even where
# the environment says not to: otherwise every run recompiles some 300 test modules (~5 s).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install run serve test test-fast fuzz structured lint typecheck bench compat open-webui package test-package clean

# llama.cpp's backends: auto (Vulkan + CPU when the Vulkan build tools are installed, else the
# CPU alone, with a notice), cpu, vulkan, or cuda (needs the CUDA toolkit). Every build has RPC.
GPU ?= auto

# llama-cpp-python is built first, by packaging/install_llama.py, into a wheel cache of its own
# keyed by version and backend (~15 minutes with Vulkan, ~6 for the CPU alone, on 2 cores;
# seconds once cached). It runs on every `make install`: a machine that gained the Vulkan
# tools, or GPU=cuda, gets its build then; otherwise it only checks the installed one.
install: $(STAMP)
	$(BIN)/python packaging/install_llama.py --backend $(GPU)

# The rest is re-installed only when the dependency list changes.
$(STAMP): pyproject.toml packaging/install_llama.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python packaging/install_llama.py --backend $(GPU)
	$(BIN)/python -m pip install --progress-bar off -e '.[dev]'
	$(BIN)/python -m server.models.files --assemble
	touch $(STAMP)

run: install
	$(BIN)/hearth

serve: install
	$(BIN)/hearth --skiplauncher

# Style, the layers (import-linter contracts in pyproject.toml), the size limits, and the
# checks that the tree and its description agree (docs/ARCHITECTURE.md, one fixture per name).
LINTED := hearth server app tests bench packaging compat tools
lint: install
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/lint-imports
	$(BIN)/python tools/check_sizes.py
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/docs/test_architecture.py \
		tests/docs/test_import_contracts.py tests/docs/test_fixtures_once.py

typecheck: install
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/python -m tests.support.instruct_model
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -q

# The inner loop: every test that runs no real model (under a minute on 2 cores).
test-fast: install
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -q -m "not model"

# The long fuzzing run (make test runs a short one): schemathesis generates requests from the
# server's OpenAPI schema against the real model; no 5xx, every 4xx in its dialect's shape.
FUZZ_EXAMPLES ?= 150
fuzz: install
	HEARTH_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest -q -s -p no:cacheprovider \
		--timeout 7200 tests/fuzz

# The structured-output property with the issue's 200 schema-bound requests across the dialects
# (make test sends 40): every answer parses and validates, or says it was cut off.
structured: install
	HEARTH_STRUCTURED_REQUESTS=200 QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -q -s \
		tests/server/dialects/test_structured_property_real.py

# Speed against llama.cpp's llama-server and llama-cpp-python's server (not a timed test).
# The first run builds llama-server from the vendored llama.cpp sources (~15 minutes).
bench: install
	$(BIN)/python -m pip install --quiet 'llama-cpp-python[server]==0.3.36'
	$(BIN)/python bench/compare.py

# llama.cpp's own server tests (from the llama-cpp-python 0.3.36 sdist) against Hearth, each test
# starting its server through compat/llama_server_shim.py: a per-case report, not a pass/fail
# gate (see docs/COMPATIBILITY.md).
# The tests' requirements get a virtualenv of their own in ~/.cache/hearth-compat.
# COMPAT_ARGS: e.g. `--against llama-server` (the baseline) or `--report compat.json`.
COMPAT_ARGS ?=
compat: install
	$(BIN)/python compat/llama_server_tests.py $(COMPAT_ARGS)

# Open WebUI (open-webui 0.12.4, in a virtualenv of its own in ~/.cache/hearth: several GB, so
# not in `make test`) driven in Chromium against Hearth over its Ollama and OpenAI connections,
# function calling at its default and "Legacy": every reply must stream on screen
# (compat/open_webui.py; docs/CLIENTS.md). OPEN_WEBUI_ARGS: e.g. `--shots docs/screenshots`.
OPEN_WEBUI_ARGS ?=
open-webui: install
	$(BIN)/python -m tests.support.instruct_model
	$(BIN)/python compat/open_webui.py $(OPEN_WEBUI_ARGS)

# The double-clickable binary: dist/hearth/hearth (one folder; see packaging/hearth.spec).
# Built in its own virtualenv with a portable llama.cpp (GGML_NATIVE=OFF: no -march=native),
# with the same backends as `make install` (Vulkan when its build tools are present).
PKG_VENV := build/package-venv
package: install
	test -x $(PKG_VENV)/bin/python || $(PYTHON) -m venv $(PKG_VENV)
	$(PKG_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(PKG_VENV)/bin/python packaging/install_llama.py --backend $(GPU) --portable
	$(PKG_VENV)/bin/python -m pip install --quiet -e . 'pyinstaller>=6.10'
	$(PKG_VENV)/bin/pyinstaller --noconfirm --log-level WARN --distpath dist \
		--workpath build/pyinstaller packaging/hearth.spec

test-package: package
	HEARTH_PACKAGE=dist/hearth/hearth QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -q tests/packaging

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
