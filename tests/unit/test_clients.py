"""Send outcome classification: `fail` only when the record certainly was not written."""
from confluent_kafka import KafkaError

from kchaos.core.config import ProducerConfig
from kchaos.workloads.clients import UNDECODABLE, decode_value, send_outcome


def test_timeouts_and_transport_errors_are_unknown():
    p = ProducerConfig()
    for code in (KafkaError._MSG_TIMED_OUT, KafkaError.REQUEST_TIMED_OUT, KafkaError._TRANSPORT,
                 KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        assert send_outcome(KafkaError(code), p) == "info"


def test_rejections_are_definite_failures():
    assert send_outcome(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE), ProducerConfig()) == "fail"
    assert send_outcome(KafkaError(KafkaError._UNKNOWN_PARTITION), ProducerConfig()) == "fail"


def test_not_enough_replicas_is_definite_only_without_retries():
    err = KafkaError(KafkaError.NOT_ENOUGH_REPLICAS)
    assert send_outcome(err, ProducerConfig(retries=0)) == "fail"
    assert send_outcome(err, ProducerConfig(retries=5)) == "info"


def test_foreign_values_decode_to_a_marker_the_checker_flags():
    assert decode_value(b"42") == 42
    assert decode_value(b"hello") == UNDECODABLE
    assert decode_value(None) == UNDECODABLE
