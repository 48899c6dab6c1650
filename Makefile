# kchaos: `make demo` and `make test` do every set-up step on a fresh Debian 12 machine.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
KCHAOS  := $(BIN)/kchaos
DEMO_ARGS ?= --time-limit 60 --interval 20 --restart-delay 4 --rate 200 --producers 4 --seed 42

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
	@echo "== 1/3 acks=1 while the leader of a partition is cut off from the other brokers (expect loss)"
	-$(KCHAOS) run --name demo-1-acks1-partition --acks 1 --min-insync 2 --nemesis partition-leader $(DEMO_ARGS)
	@echo "== 2/3 acks=all, min.insync.replicas=2 under the same partitions and leader kills (expect none)"
	-$(KCHAOS) run --name demo-2-acksall-partition --acks all --min-insync 2 \
	    --nemesis partition-leader,kill-leader $(DEMO_ARGS)
	@echo "== 3/3 acks=all, min.insync.replicas=2 when every node loses power at once (unsynced writes go)"
	-$(KCHAOS) run --name demo-3-acksall-powerloss --acks all --min-insync 2 --nemesis power-fail-all $(DEMO_ARGS)
	@$(BIN)/python -m harness.demo_summary results demo-1-acks1-partition demo-2-acksall-partition \
	    demo-3-acksall-powerloss

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
