"""Rules whose verb Volcano has not called in the last N cycles: ``serve`` says so in its log,
``/status`` (``rules_not_called``) and the metric ``policy_extender_rules_not_called``.

A rule is dead when Volcano never calls its verb: a ``ready`` rule with a conf that has no
``extender.jobReadyVerb`` (the shipped confs leave it out), victim rules without ``preempt`` or
``reclaim`` in ``actions:``, or a verb renamed in the conf but not in ``verbs``. Nothing fails:
the rule is simply never evaluated. The decision tally already counts each verb's calls per cycle
across every worker and replica (``DecisionTally.note_call``), so after ``cycles`` closed Volcano
cycles (those with an ``onSessionOpen``; the open one is still filling; one whose entries the
store's ``tally_max_entries`` cap dropped is not counted) a verb serving the set's
rules with no call in any of them is reported, with the likely cause. A quiet cluster (no
pending task: no predicate call) shows the same; the report says both.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Iterator

from policy_extender.decide.served import served
from policy_extender.decide.tallying import CALLS, OPENED, SEP

log = logging.getLogger("policy_extender.unserved")

#: verb -> the conf argument that registers it, as the report names it
ARGUMENT = "extender.{verb}Verb"


def rules_not_called(policy_set: Any, tally: Any, cycles: int, open_cycle: str | None = None) -> dict | None:
    """``{"cycles": n, "rules": [{rule, kind, verb, where}]}``, or None while fewer than
    ``cycles`` closed Volcano cycles are in the tally (or it is off, or ``cycles`` is 0).
    ``open_cycle``: the session id of the cycle still open, left out (its calls are still coming)."""
    if policy_set is None or cycles <= 0 or tally is None or not tally.enabled:
        return None
    called_by_cycle = [(cycle_id, dropped, set(_verbs(counts)))
                       for cycle_id, _, dropped, counts, _ in tally.read(CALLS + SEP)]
    # newest first; a cycle whose entries the store's cap dropped may lack a verb's: no evidence
    closed = [verbs for cycle_id, dropped, verbs in called_by_cycle
              if OPENED in verbs and cycle_id != open_cycle and not dropped][:cycles]
    if len(closed) < cycles:
        return None
    called = set().union(*closed)
    by_verb = served(policy_set).kinds_by_verb
    rules = [{"rule": rule.name, "kind": rule.kind, "verb": verb, "where": f"{rule.file}:{rule.line}:{rule.column}"}
             for verb, kinds in by_verb.items() if verb not in called
             for rule in policy_set.for_protocol("volcano").rules if rule.kind in kinds and "volcano" in rule.protocols]
    return {"cycles": cycles, "rules": rules}


def _verbs(counts: dict[str, int]) -> Iterator[str]:
    for key, count in counts.items():
        if count > 0:
            yield key.split(SEP, 1)[0]


def describe(report: dict) -> list[str]:
    """One line per verb: which rules it leaves dead and what to check."""
    by_verb: dict[str, list[str]] = {}
    for rule in report["rules"]:
        by_verb.setdefault(rule["verb"], []).append(f"{rule['kind']} {rule['rule']} ({rule['where']})")
    return [f"Volcano has not called {verb} in the last {report['cycles']} cycles, so these rules decided "
            f"nothing: {', '.join(rules)}; check that the scheduler conf registers {ARGUMENT.format(verb=verb)} "
            "(policy-extender volcano-conf --policies derives it) and, for victim rules, that actions: holds "
            "preempt/reclaim (or no task needed the verb: a quiet cluster)" for verb, rules in by_verb.items()]


#: seconds before a verb's warning is logged again for the same policy set: on a real cluster
#: (docs/e2e-cluster.md) which verbs a cycle calls comes and goes with the workload, and a warning
#: logged whenever the report changed came every cycle or two from each worker
RELOG_AFTER = 3600.0


class UnservedWatch:
    """Per worker: after each onSessionOpen, the report of the set and the tally, kept for
    ``/status`` and the metric (always current) and logged: each verb's line the first time the
    verb is reported for a policy set, again only after ``RELOG_AFTER`` seconds. ``update_soon``
    does it on a thread of its own, so the open's answer never waits for the store reads
    (Volcano's httpTimeout bounds it)."""

    def __init__(self, cycles: int, clock: Any = time.monotonic) -> None:
        self.cycles = cycles
        self.report: dict | None = None
        self._clock = clock
        self._logged: dict[tuple[Any, str], float] = {}  # (policy set, verb) -> when its line was logged
        self._lock = threading.Lock()
        self.thread: threading.Thread | None = None  # the last update_soon's (tests join it)

    def update_soon(self, policy_set: Any, tally: Any, set_metric: Any, open_cycle: str | None = None) -> None:
        if self.cycles <= 0 or not getattr(tally, "enabled", False):
            return
        self.thread = threading.Thread(target=self._update_once, args=(policy_set, tally, set_metric, open_cycle),
                                       name="rules-not-called", daemon=True)
        self.thread.start()

    def _update_once(self, *args: Any) -> None:
        with self._lock:  # one at a time, in the order of the opens: the newest open's is the last word
            self.update(*args)

    def update(self, policy_set: Any, tally: Any, set_metric: Any, open_cycle: str | None = None) -> dict | None:
        try:
            report = rules_not_called(policy_set, tally, self.cycles, open_cycle)
        except Exception:  # a store hiccup: nothing is decided on this, try at the next open
            log.debug("reading the verb calls of the last cycles failed", exc_info=True)
            return self.report
        self.report = report
        if report is None:
            return None
        counts: dict[str, int] = {}
        for rule in report["rules"]:
            counts[rule["verb"]] = counts.get(rule["verb"], 0) + 1
        set_metric(counts, [v for v in served(policy_set).kinds_by_verb])
        now = self._clock()
        version = getattr(policy_set, "version", id(policy_set))
        due = {r["verb"] for r in report["rules"]
               if now - self._logged.get((version, r["verb"]), -RELOG_AFTER) >= RELOG_AFTER}
        if due:
            for line in describe({**report, "rules": [r for r in report["rules"] if r["verb"] in due]}):
                log.warning("%s", line)
            self._logged.update({(version, verb): now for verb in due})
        return report
