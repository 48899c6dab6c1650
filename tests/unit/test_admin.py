"""create_topic's retries: which errors are sent again, and when an existing topic counts as created.

The admin client is replaced by one whose CreateTopics answers are scripted,
since a dropped bootstrap connection cannot be provoked on demand.
"""
from concurrent.futures import Future

import pytest
from confluent_kafka import KafkaError, KafkaException

from kchaos.clusters import admin
from kchaos.core.config import TopicConfig


class ScriptedClient:
    """Answers each create_topics call with the next error of `script` (None: success)."""

    def __init__(self, script):
        self.script = list(script)
        self.calls = 0

    def create_topics(self, topics, **_):
        self.calls += 1
        fut = Future()
        err = self.script.pop(0)
        fut.set_exception(KafkaException(KafkaError(err))) if err is not None else fut.set_result(None)
        return {t.topic: fut for t in topics}


@pytest.fixture
def scripted(monkeypatch):
    def install(*script):
        client = ScriptedClient(script)
        monkeypatch.setattr(admin, "admin_client", lambda *a, **k: client)
        return client
    return install


def test_dropped_request_is_sent_again_and_an_existing_topic_then_counts_as_made(scripted):
    client = scripted(KafkaError._DESTROY_BROKER, KafkaError.TOPIC_ALREADY_EXISTS)
    admin.create_topic("127.0.0.1:1", TopicConfig())
    assert client.calls == 2


def test_existing_topic_on_the_first_attempt_is_an_error(scripted):
    client = scripted(KafkaError.TOPIC_ALREADY_EXISTS)
    with pytest.raises(KafkaException):
        admin.create_topic("127.0.0.1:1", TopicConfig())
    assert client.calls == 1


def test_a_definite_rejection_is_not_retried(scripted):
    client = scripted(KafkaError.INVALID_REPLICATION_FACTOR)
    with pytest.raises(KafkaException):
        admin.create_topic("127.0.0.1:1", TopicConfig())
    assert client.calls == 1


def test_transient_errors_give_up_after_the_attempts(scripted):
    client = scripted(*[KafkaError._TIMED_OUT] * 3)
    with pytest.raises(KafkaException):
        admin.create_topic("127.0.0.1:1", TopicConfig(), attempts=3)
    assert client.calls == 3
