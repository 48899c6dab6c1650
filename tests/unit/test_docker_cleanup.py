"""`kchaos cleanup` beside a run that is tearing itself down: what is already gone or going is not an error."""
from types import SimpleNamespace

import docker.errors
import pytest

from kchaos.clusters.docker import _gone_or_going


def raising(exc):
    def remove(**kw):
        raise exc
    return remove


def test_removed_gone_and_going_are_told_apart_and_other_errors_raise():
    assert _gone_or_going(lambda **kw: None, force=True) is True
    assert _gone_or_going(raising(docker.errors.NotFound("gone"))) is False
    going = docker.errors.APIError("removal already in progress", response=SimpleNamespace(status_code=409))
    assert _gone_or_going(raising(going)) is False
    broken = docker.errors.APIError("engine broke", response=SimpleNamespace(status_code=500))
    with pytest.raises(docker.errors.APIError):
        _gone_or_going(raising(broken))
