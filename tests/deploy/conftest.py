"""The compose suite (issue 15): the service's own images (make
service-images) brought up with docker-compose on this machine, a session run
through it end to end, the Kubernetes sidecar pod reproduced with compose,
and the engines helper of the harness. Everything is named and labelled with
the run's id (deploy_lib.RUN) and removed by that at the end, even on a
failure."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from deploy_lib import EngineVolume  # noqa: E402  pylint: disable=wrong-import-position


@pytest.fixture(scope="session")
def engine_volume():
    v = EngineVolume()
    try:
        yield v
    finally:
        v.remove()
