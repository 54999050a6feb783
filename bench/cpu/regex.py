"""``matches()`` before and after RE2: Python's ``re`` (the engine before, behind a load-time shape
and cost check) against RE2 as ``lang/regex.py`` compiles it (a one-pattern ``re2.Set``).

Method (printed): in-process, one pattern at a time, wall time per ``search`` call, median of
``--rounds`` rounds (each round times one call, or one pass over the 1,000 names); the old
engine's exponential case is timed once per size and only up to ``--max-n`` (26 takes seconds):

* ``(a?){n}a{n}`` on ``"a" * n``: passed the old check (no repeated group that repeats, cost
  under 256^3) and is exponential for a backtracking engine;
* ``.*.*=`` over 1,000 node names of 253 characters (a DNS name's limit) with no ``=``: passed
  the old check (256^3) and is cubic per name for a backtracking engine;
* ``^gpu-node-[0-9]+$`` on ``gpu-node-12``: what an ordinary pattern costs a call.

``python -m bench.cpu.regex [--rounds 5] [--max-n 26]``
"""

from __future__ import annotations

import argparse
import re
import statistics
import time

from policy_extender.lang.regex import compile_pattern


def timed(search, subjects: list[str], rounds: int) -> float:
    """Median seconds of one pass of ``search`` over ``subjects``."""
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for subject in subjects:
            search(subject)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def row(case: str, before: float, after: float) -> None:
    ratio = before / after if after else float("inf")
    print(f"{case:<44} {before * 1e3:>12.3f} {after * 1e3:>12.3f} {ratio:>10.0f}x")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cpu.regex", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-n", type=int, default=26, help="largest n of (a?){n}a{n} timed on Python's re")
    args = parser.parse_args(argv)
    print(__doc__.split("\n\n")[1].replace("\n", " "))
    print(f"\n{'case':<44} {'re (ms)':>12} {'RE2 (ms)':>12} {'re / RE2':>11}")
    for n in range(20, args.max_n + 1, 2):
        pattern, subject = f"(a?){{{n}}}a{{{n}}}", "a" * n
        before = timed(re.compile(pattern).search, [subject], 1)  # once: seconds at 26
        after = timed(compile_pattern(pattern).search, [subject], args.rounds)
        row(f"{pattern} on {n} characters", before, after)
    names = [f"node-{i:04d}-" + "x" * 243 for i in range(1000)]
    rounds = max(1, args.rounds // 2)
    row(".*.*= over 1,000 names of 253 characters",
        timed(re.compile(".*.*=").search, names, rounds), timed(compile_pattern(".*.*=").search, names, rounds))
    ordinary = ["gpu-node-12"] * 10_000
    before = timed(re.compile("^gpu-node-[0-9]+$").search, ordinary, args.rounds) / len(ordinary)
    after = timed(compile_pattern("^gpu-node-[0-9]+$").search, ordinary, args.rounds) / len(ordinary)
    print(f"{'^gpu-node-[0-9]+$ on gpu-node-12, per call':<44} {before * 1e6:>9.2f} us {after * 1e6:>9.2f} us "
          f"{before / after:>10.2f}x")


if __name__ == "__main__":
    main()
