# kchaos: `make demo` and `make test` do every set-up step on a fresh Debian 12 machine.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
KCHAOS  := $(BIN)/kchaos

.PHONY: setup host install prepare demo test unit integration cleanup clean

setup: host install prepare

host:
	bash clusters/setup-host.sh

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

install: $(BIN)/python
	@# setuptools' BuildBackendWarnings (UserWarning) about editable installs are advice to packagers, not to users.
	PYTHONWARNINGS=ignore::UserWarning $(BIN)/pip install -q -e '.[test]'

# Kafka jars from Maven Central and the node image (debootstrap + docker import), cached.
prepare: install
	$(KCHAOS) prepare

# Three 60-second runs as one suite (suites/demo.yaml): a summary table, compare.html with a heatmap,
# and a report.html per run. Exit 1 would mean acks=all with min.insync=2 lost data: the table says which.
demo: setup
	$(KCHAOS) suite suites/demo.yaml
	@echo "== reports: results/suites/demo/latest/compare.html and each run's report.html; browse with: $(KCHAOS) serve"

# The unit tests run on two workers (pytest-xdist): most are single-threaded Python, and CI has two cores.
test: setup
	$(BIN)/pytest tests/unit -n 2 -v --durations=10
	$(BIN)/pytest tests/integration -v --durations=25

unit: install
	$(BIN)/pytest tests/unit -n 2 -v

integration: setup
	$(BIN)/pytest tests/integration -v

cleanup:
	$(KCHAOS) cleanup

clean: cleanup
	rm -rf $(VENV) *.egg-info
