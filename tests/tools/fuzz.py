"""``python -m tests.tools.fuzz --examples 100000``: the dedicated fuzz run of the language.

Splits the examples over four generators (random text, token streams, syntax trees rendered to
text, mutated example policies), checks ``oracle.compile_and_evaluate`` on each under a
per-example deadline, and prints the figures (examples, outcomes, seconds) for docs/reliability.md.
"""

from __future__ import annotations

import argparse
import string
import sys
import time
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.tools import strategies
from tests.tools.oracle import OUTCOMES, compile_and_evaluate

#: A hang guard per example, not a performance target (the work budget bounds one at ~2 s).
DEADLINE = timedelta(seconds=10)


def generators() -> dict[str, st.SearchStrategy[str]]:
    return {"random text": st.text(alphabet=string.printable, max_size=300),
            "token streams": strategies.token_streams(),
            "syntax trees": strategies.trees(),
            "mutated policies": strategies.mutated_policies()}


def run(name: str, strategy: st.SearchStrategy[str], examples: int) -> dict:
    OUTCOMES.clear()
    started = time.perf_counter()

    @settings(max_examples=examples, deadline=DEADLINE, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def property_holds(text):
        compile_and_evaluate(text)

    property_holds()
    return {"generator": name, "examples": sum(OUTCOMES.values()), **OUTCOMES,
            "seconds": round(time.perf_counter() - started, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.tools.fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10_000, help="examples in all (split over generators)")
    args = parser.parse_args(argv)
    share = max(1, args.examples // len(generators()))
    total = 0
    for name, strategy in generators().items():
        figures = run(name, strategy, share)
        total += figures["examples"]
        print(" ".join(f"{k}={v}" for k, v in figures.items()), flush=True)
    print(f"total examples={total}: only PolicyError escaped compiling, only EvalError escaped evaluating")
    return 0


if __name__ == "__main__":
    sys.exit(main())
