# kchaos: `make demo` and `make test` do every set-up step on a fresh Debian 12 machine.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
KCHAOS  := $(BIN)/kchaos

.PHONY: setup host install bytecode jars base prepare demo test lint types unit integration cleanup clean

setup: host install prepare

host:
	bash clusters/setup-host.sh

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

install: $(VENV)/.installed bytecode

# kchaos's own modules (the checkout's folders, installed in editable mode) compiled too, and again whenever make
# installs: where the environment sets PYTHONDONTWRITEBYTECODE (this project's machines do), no process writes what it
# compiles, so every `kchaos` command, test worker and Spark worker would compile them again (measured: 0.5 s of CPU
# and a second of waiting for each). compileall skips what is current.
bytecode: | $(BIN)/python
	$(BIN)/python -m compileall -q -j 0 kchaos core harness clusters workloads nemesis checkers reports evidence > /dev/null

# Installed again only when pyproject.toml changes. pip compiles the packages' bytecode one file at a time; compileall
# does it on every core, in half the time (a file that does not compile is compiled, or not, when imported, as pip
# leaves it).
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	@# setuptools' BuildBackendWarnings (UserWarning) about editable installs are advice to packagers, not to users.
	PYTHONWARNINGS=ignore::UserWarning $(BIN)/pip install -q --no-compile -e '.[test]'
	$(BIN)/python -m compileall -q -j 0 "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" > /dev/null || true
	touch $@

# Kafka jars from Maven Central and the node image (mmdebstrap + docker import), cached.
prepare: install
	$(KCHAOS) prepare

# The default release's Kafka jars alone (cached): what the unit tests that compile the Java client read.
jars: install
	$(BIN)/python -c 'from kchaos.clusters.distribution import resolve; from kchaos.core.kafka_versions import DEFAULT; resolve(DEFAULT)'

# The base image and lazyfs alone (cached): what every node image builds on, made while the jars download.
base: install
	$(BIN)/python -c 'from kchaos.clusters import lazyfs; from kchaos.clusters.engine import docker_client; from kchaos.clusters.image import ensure_base; ensure_base(docker_client()); lazyfs.build()'

# Three 60-second runs as one suite (suites/demo.yaml): a summary table, compare.html with a heatmap,
# and a report.html per run. Exit 1 would mean acks=all with min.insync=2 lost data: the table says which.
demo: setup
	$(KCHAOS) suite suites/demo.yaml
	@echo "== reports: results/suites/demo/latest/compare.html and each run's report.html; browse with: $(KCHAOS) serve"

# The host, the venv and the Kafka jars (the base image beside them) first; then the unit lane (Spark's class
# archive, lint, types, the unit tests on one worker at the lowest priority, those that start Spark as a tier of
# their own, then the integration tests that start no Kafka cluster) runs beside the cluster lane (the node image,
# then the other integration tests), which mostly waits on Kafka. Each tier prints its time (tests/tiers.sh).
test:
	@bash tests/tiers.sh

# The product's folders, each installed as kchaos.<folder>.
PACKAGES := core harness clusters workloads nemesis evidence checkers reports
LINTED   := kchaos $(PACKAGES) tests bench

lint: install
	$(BIN)/ruff check $(LINTED)

# mypy reads the packages through build/types/kchaos, links to the folders setuptools maps under kchaos.
types: install
	@rm -rf build/types && mkdir -p build/types/kchaos
	@for f in kchaos/*.py; do ln -s ../../../$$f build/types/kchaos/; done
	@for p in $(PACKAGES); do ln -s ../../../$$p build/types/kchaos/$$p; done
	cd build/types && ../../$(BIN)/mypy --config-file ../../pyproject.toml -p kchaos

unit: install
	$(BIN)/pytest tests/unit -n 2 -v

integration: setup
	$(BIN)/pytest tests/integration -v

cleanup:
	$(KCHAOS) cleanup

clean: cleanup
	rm -rf $(VENV) *.egg-info
