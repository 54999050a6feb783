"""Shared inputs for the wire tests: the real sample bodies and the two read sets."""


import pytest

from policy_extender.wire.structs import full_reads

from tests import SAMPLES


def sample(name: str) -> bytes:
    return (SAMPLES / f"{name}.json").read_bytes()


@pytest.fixture(params=["full", "minimal"])
def reads(request):
    """Every schema field, or only what the service always needs (ALWAYS_READ)."""
    return full_reads() if request.param == "full" else {}


@pytest.fixture
def full():
    return full_reads()
