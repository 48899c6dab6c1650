"""How kchaos starts the JVMs it runs on the host for seconds at a time (Kafka's tools, its Java clients, Spark's
driver)."""
from __future__ import annotations

__all__ = ["SHORT_LIVED"]

# A JVM that lives seconds spends them loading classes and compiling: the quick C1 compiler alone, and the serial
# collector, whose one thread costs less than the parallel collector's many on a small heap.
SHORT_LIVED = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
