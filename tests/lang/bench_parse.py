"""``python tests/lang/bench_parse.py [--repeat N]``: the parse time of the bundled policy set.

Method: the Lark parser is built first (once per process, not counted); then every
``policies/*.policy`` file is parsed with ``parse_file`` ``--inner`` times per sample, ``--repeat``
samples; prints the median and the minimum per pass over the set. Run it on two commits (e.g. with
``git archive <commit> policy_extender grammar`` unpacked elsewhere, ``PYTHONPATH`` pointing
there, and the script started from outside the repository so that its checkout is not imported
instead) to compare them; the machine's noise is in the spread between median and minimum.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from policy_extender.lang.parser import parse_file
from policy_extender.lang.syntax import lark_parser

POLICIES = Path(__file__).resolve().parents[2] / "policies"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--inner", type=int, default=20)
    args = parser.parse_args()
    sources = {p.name: p.read_text() for p in sorted(POLICIES.glob("*.policy"))}
    lark_parser()
    samples = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        for _ in range(args.inner):
            for name, text in sources.items():
                parse_file(name, text)
        samples.append((time.perf_counter() - started) / args.inner)
    print(f"parse {len(sources)} bundled files ({sum(map(len, sources.values()))} chars): "
          f"median {statistics.median(samples) * 1e3:.3f} ms, min {min(samples) * 1e3:.3f} ms per pass "
          f"({args.repeat} samples x {args.inner} passes)")


if __name__ == "__main__":
    main()
