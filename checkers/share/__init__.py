"""The share workload's checker: a history of share-group deliveries and acknowledgements against KIP-932's
guarantees (at-least-once, the delivery count limit, one holder per acquisition lock)."""
