"""The wire tests' read sets: every schema field, or only what the service always needs."""

import pytest

from policy_extender.wire.structs import full_reads


@pytest.fixture(params=["full", "minimal"])
def reads(request):
    """Every schema field, or only what the service always needs (ALWAYS_READ)."""
    return full_reads() if request.param == "full" else {}


@pytest.fixture
def full():
    return full_reads()
