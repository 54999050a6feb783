"""Benchmark smoke tests."""
