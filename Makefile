# kchaos: `make demo` and `make test` do every set-up step on a fresh Debian 12 machine.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
KCHAOS  := $(BIN)/kchaos
DEMO_ARGS ?= --time-limit 60 --interval 10 --restart-delay 4 --rate 300 --producers 8 --seed 42

.PHONY: setup host install prepare demo test unit integration cleanup clean

setup: host install prepare

host:
	bash clusters/setup-host.sh

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'

# Kafka jars from Maven Central and the node image (debootstrap + docker import), cached.
prepare: install
	$(KCHAOS) prepare

demo: setup
	@echo "== acks=1 under kill-leader (a killed leader may take acknowledged writes with it)"
	-$(KCHAOS) run --name demo-acks1 --acks 1 --min-insync 2 --nemesis kill-leader $(DEMO_ARGS)
	@echo "== acks=all, min.insync.replicas=2 under kill-leader (should lose nothing)"
	-$(KCHAOS) run --name demo-acksall --acks all --min-insync 2 --nemesis kill-leader $(DEMO_ARGS)
	@$(BIN)/python -m harness.demo_summary results

test: setup
	$(BIN)/pytest tests -v

unit: install
	$(BIN)/pytest tests/unit -v

integration: setup
	$(BIN)/pytest tests/integration -v

cleanup:
	$(KCHAOS) cleanup

clean: cleanup
	rm -rf $(VENV) *.egg-info
