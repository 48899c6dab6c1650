"""Evidence: Kafka's own files of a run, collected from the nodes, decoded, and told as why each lost or
anomalous write happened. Below the verdict and the reports; it imports only core."""


class EvidenceError(ValueError):
    """The run directory has no usable evidence (no evidence/raw, no test.json): one line, exit code 3."""
