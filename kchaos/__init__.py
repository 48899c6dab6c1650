"""kchaos: a Jepsen-style chaos harness for Apache Kafka.

Everything installs under this one package. Its sub-packages live in the checkout's top-level folders
(`kchaos.harness` is harness/, `kchaos.checkers` is checkers/, and so on), mapped by pyproject.toml.
"""
