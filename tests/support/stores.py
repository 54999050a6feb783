"""How a test gets an empty session store of each kind the scheme registry lists
(``store_url.SCHEMES``): the fixtures of tests/session/conftest.py named by kind."""

from __future__ import annotations

import pytest

from policy_extender.store_url import SCHEMES

#: kind (``StoreScheme.name``) -> the fixture giving the setting of a store of that kind whose
#: data is empty when the fixture is requested, and whether the kind needs a server (then its
#: tests are slow: the fast loop starts none).
TEST_SETTINGS: dict[str, tuple[str, bool]] = {
    "sqlite": ("sqlite_setting", False),
    "redis": ("redis_setting", True),
    "redis+sentinel": ("sentinel_setting", True),
}


def store_kinds() -> list:
    """Every registered kind, as a parameter (slow for a kind that needs a server; a kind without
    an entry in TEST_SETTINGS is not slow, so its failure shows in the fast loop too)."""
    return [pytest.param(scheme.name, id=scheme.name,
                         marks=[pytest.mark.slow] if TEST_SETTINGS.get(scheme.name, ("", False))[1] else [])
            for scheme in SCHEMES]
