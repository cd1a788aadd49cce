# `make test` and `make demo` each build .venv from pyproject.toml when it is missing.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.tunekit-installed

.PHONY: test demo lint typecheck pytest docs bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,docs,opencl]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/tunekit demo

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy

pytest: $(STAMP)
	$(VENV)/bin/pytest

docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict --site-dir site

test: lint typecheck pytest docs

bench: $(STAMP)
	$(PY) benches/dispatch.py

clean:
	rm -rf $(VENV) site .mypy_cache .pytest_cache .ruff_cache
