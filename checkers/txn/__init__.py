"""The txn workload's checker: transactions' anomalies and dependency cycles, on Spark and in a reference."""
