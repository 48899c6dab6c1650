"""The queue workload's checker: lost, duplicated and reordered writes, on Spark and in a reference."""
