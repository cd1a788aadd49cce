# `make check`, `make test` and `make demo` each build .venv from pyproject.toml when it is missing.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.tunekit-installed
OPENCL := $(VENV)/.opencl-runtime-ok
# pytest-xdist workers, one per CPU: on a 2-core machine 2 beat 0 and 4 (fast tier: 36 s, 62 s, 43 s).
# worksteal: a worker that runs out takes tests queued for the other, so the OpenCL tests of
# 20-100 s each do not leave one worker idle at the end (whole suite here: 8.0 min, 8.9 with load).
JOBS ?= auto
PYTEST := $(VENV)/bin/pytest -n $(JOBS) --dist worksteal
# The fast tier: tests that need no OpenCL device, start no process and take well under a second.
FAST := not slow and not opencl and not subprocess

.PHONY: check test demo lint typecheck pytest pytest-fast docs bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,docs,opencl,report,postgres,ray]'
	touch $(STAMP)

# An OpenCL device that really compiles (Debian's PoCL where pip's cannot target this CPU).
$(OPENCL): $(STAMP) scripts/ensure_opencl_runtime.py
	$(PY) scripts/ensure_opencl_runtime.py
	touch $(OPENCL)

demo: $(OPENCL)
	$(VENV)/bin/tunekit demo

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache

typecheck: $(STAMP)
	$(VENV)/bin/mypy

pytest: $(OPENCL)
	$(PYTEST)

pytest-fast: $(STAMP)
	$(PYTEST) -m "$(FAST)"

docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict --site-dir site

# Before a commit: under 2 minutes.
check: lint typecheck pytest-fast

# Everything CI runs (.ci/run).
test: lint typecheck pytest docs

bench: $(STAMP)
	$(PY) benches/dispatch.py

clean:
	rm -rf $(VENV) site .mypy_cache .pytest_cache .ruff_cache
