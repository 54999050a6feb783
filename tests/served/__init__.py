"""Tests through a real ``policy-extender serve`` (gunicorn) over loopback; every one is slow (tests/conftest.py marks the folder)."""
