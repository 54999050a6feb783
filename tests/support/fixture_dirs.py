"""Small policy directories with fixtures, for the fixture runner's tests: a zone filter and a GPU
score, and the cases that check them."""

import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

ZONE_POLICY = """\
filter same_zone: node.labels["zone"] == task.annotations["zone"]
  reason "node zone differs from the task's zone"
  unresolvable
score gpu_free: 10 * free_gpu
"""

ZONE_FIXTURES = """\
defaults:
  decision: filter
  input:
    task: {name: train-0, annotations: {zone: a}}
cases:
  - name: same zone fits
    input:
      node: {name: n1, labels: {zone: a}}
    expect: {fits: true}

  - name: other zone is rejected
    input:
      node: {name: n2, labels: {zone: b}}
    expect: {fits: false, code: 3, reason: "zone differs", rule: same_zone}

  - name: more free gpus score higher
    decision: score
    input:
      nodes:
        - {name: small, idle: {gpu: 1}}
        - {name: big, idle: {gpu: 4}}
    expect: {order: [big, small], scores: {big: 40, small: 10}}
"""


def write_policy_dir(directory: Path, policy: str = ZONE_POLICY, fixtures: str = ZONE_FIXTURES,
                     name: str = "zone") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.policy").write_text(textwrap.dedent(policy))
    (directory / f"{name}.fixtures.yaml").write_text(textwrap.dedent(fixtures))
    return directory
