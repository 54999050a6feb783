"""Policy files written by the tests: the set most web tests run, and the writer."""

from __future__ import annotations

from pathlib import Path

#: The policies most tests run: one rule of every kind, each readable from the sample bodies.
POLICIES = {
    "zone.policy": """\
filter zone: node.labels["topology.kubernetes.io/zone"] != "zone-b"
  reason "zone-b is reserved"
score gpu: 10 * free_gpu
""",
    "gang.policy": """\
enqueue gang-enqueue: job.min_available <= 3
overused cap: queue.name == "restricted"
ready gang-ready: job.ready_tasks >= job.min_available
victim low: evictee.priority < evictor.priority
""",
}


def write_policies(directory: Path, policies: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in policies.items():
        (directory / name).write_text(text, encoding="utf-8")
    return directory
