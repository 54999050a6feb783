"""Served benchmarks: a real ``policy-extender serve`` under gunicorn, driven over loopback (latency, throughput, server CPU per call)."""
