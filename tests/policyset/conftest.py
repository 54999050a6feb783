"""Fixtures for the reload tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def language():
    """Policy texts told apart by their score, compiled by the real compiler."""
    from .language import Language  # imports the compiler only where a test needs it

    return Language()
