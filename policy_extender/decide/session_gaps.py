"""Calls that arrive without the session their rules expect, and onSessionOpens Volcano gave up on.

Two gaps make rules that read session data (``task.job``, the snapshot's ``job``/``queue``,
``session.*``) see nulls and zeros:

* ``no_session``: a call arrives while no session is open: Volcano's onSessionOpen failed (a
  timeout: Volcano uses the same ``extender.httpTimeout`` for the whole snapshot) but it went on
  calling (``extender.ignorable: true``), ``extender.onSessionOpenVerb`` is not set, or the
  session expired or its store lost it;
* ``job_not_in_snapshot``: a task-scoped call (predicate, prioritize, preemptable, reclaimable)
  whose task's job is not in the open session's snapshot.

:class:`SessionGaps` (one per worker) counts both per verb (the batched metrics
``policy_extender_calls_without_session_total`` and
``policy_extender_calls_job_not_in_session_total``), logs one WARNING per cycle and gap with what
to do (again every ``REPEAT_SECONDS`` while the same gap goes on with no cycle boundary, e.g.
when no session is ever opened), and keeps the counts of its last two cycles for ``/status``. A
cycle is a session id; calls without a session belong to "no session, after session X" where X
is the last session this worker saw. Under gunicorn each worker publishes its cycles to a file in
the metrics directory at every metrics flush, and ``/status`` merges every worker's.

:func:`late_open_watch` is a request-finished callback: an onSessionOpen that took longer than
``volcano_timeout`` to receive and store is logged at WARNING and counted
(``policy_extender_session_open_late_total``): Volcano had already given up on it.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

from policy_extender import metrics, process
from policy_extender.verb_names.volcano import ON_SESSION_OPEN

log = logging.getLogger("policy_extender.sessions")

NO_SESSION = "no_session"
JOB_NOT_IN_SNAPSHOT = "job_not_in_snapshot"
GAPS = (NO_SESSION, JOB_NOT_IN_SNAPSHOT)

#: Seconds after which a gap that goes on in the same cycle is logged again.
REPEAT_SECONDS = 60.0
#: Job UIDs kept as examples per cycle.
EXAMPLE_JOBS = 5
#: File name pattern of a worker's published cycles in the metrics directory.
FILE_PATTERN = "session-gaps-{pid}.json"

ADVICE = {
    NO_SESSION: (
        "no scheduling session is open, so rules reading task.job, the snapshot's job or queue, or "
        "session.* see null and zeros. Volcano's onSessionOpen did not reach this service or failed: "
        "if it timed out (see policy_extender_session_open_late_total and the onSessionOpen "
        "durations), raise extender.httpTimeout (docs/operations.md, 'Choosing "
        "extender.httpTimeout'); check that extender.onSessionOpenVerb is configured and names "
        "this service's onSessionOpen path; or the session outlived session_ttl. Set "
        "require_session to answer such calls 500 so that extender.ignorable decides"),
    JOB_NOT_IN_SNAPSHOT: (
        "the task's job is not in the open session's snapshot, so rules reading task.job or its "
        "queue see null. Volcano snapshots only jobs whose PodGroup and queue it knows; if this "
        "cycle's onSessionOpen failed, the open session may be an older cycle's (check "
        "policy_extender_session_open_late_total; raise extender.httpTimeout). Set "
        "require_session to answer such calls 500 so that extender.ignorable decides"),
}


@dataclass
class Cycle:
    """One cycle's gaps as seen by one worker."""

    key: str                       # "session <id>" or "no session after <id>|none"
    first_at: float
    last_at: float
    counts: dict[str, dict[str, int]] = field(default_factory=lambda: {gap: {} for gap in GAPS})
    jobs: list[str] = field(default_factory=list)
    warned_at: dict[str, float] = field(default_factory=dict)
    since_warning: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"cycle": self.key, "first_at": self.first_at, "last_at": self.last_at,
                **{gap: dict(self.counts[gap]) for gap in GAPS}, "jobs_not_in_snapshot": list(self.jobs)}


class SessionGaps:
    """This worker's calls without a session (see the module docstring); thread-safe."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.lock = threading.Lock()
        #: the last session id a call of this worker saw (read without the lock: one attribute)
        self.last_session_id: str | None = None
        self.cycles: list[Cycle] = []   # the last two, newest last
        self.dirty = False
        _publish_this(self)

    def saw_session(self, session_id: str) -> None:
        """A call found ``session_id`` open (called only when it differs from the last one)."""
        self.last_session_id = session_id

    def no_session(self, verb: str) -> None:
        self._note(NO_SESSION, verb, f"no session after {self.last_session_id or 'none'}", None)

    def job_not_in_snapshot(self, verb: str, session_id: str, job_uid: str | None) -> None:
        self._note(JOB_NOT_IN_SNAPSHOT, verb, f"session {session_id}", job_uid or "(none)")

    def _note(self, gap: str, verb: str, key: str, job: str | None) -> None:
        metrics.note_session_gap(gap, verb)
        now = self.clock()
        with self.lock:
            cycle = self._cycle(key, now)
            counts = cycle.counts[gap]
            counts[verb] = counts.get(verb, 0) + 1
            if job is not None and job not in cycle.jobs and len(cycle.jobs) < EXAMPLE_JOBS:
                cycle.jobs.append(job)
            cycle.since_warning[gap] = cycle.since_warning.get(gap, 0) + 1
            warned = cycle.warned_at.get(gap)
            due = warned is None or now - warned >= REPEAT_SECONDS
            if due:
                cycle.warned_at[gap] = now
                calls, cycle.since_warning[gap] = cycle.since_warning[gap], 0
            self.dirty = True
        if due:
            again = "" if warned is None else f" ({calls} calls in the last {now - warned:.0f} s)"
            example = f" (job {job})" if job is not None else ""
            log.warning("%s: %s call%s%s: %s", key, verb, example, again, ADVICE[gap],
                        extra={"gap": gap, "verb": verb, "cycle": key})

    def _cycle(self, key: str, now: float) -> Cycle:
        if self.cycles and self.cycles[-1].key == key:
            cycle = self.cycles[-1]
        else:
            found = [c for c in self.cycles if c.key == key]
            cycle = found[0] if found else Cycle(key, now, now)
            self.cycles = [c for c in self.cycles if c.key != key][-1:] + [cycle]
        cycle.last_at = now
        return cycle

    def recent(self) -> list[dict]:
        """This worker's last two cycles with gaps, oldest first."""
        with self.lock:
            return [c.as_dict() for c in self.cycles]

    # --- publishing for /status under gunicorn ------------------------------------------------

    def publish(self) -> None:
        """Write this worker's cycles to the metrics directory (a metrics flush hook)."""
        directory = os.environ.get(metrics.MULTIPROC_ENV)
        if not directory or not self.dirty:
            return
        with self.lock:
            self.dirty = False
            data = json.dumps({"pid": process.pid, "cycles": [c.as_dict() for c in self.cycles]})
        path = os.path.join(directory, FILE_PATTERN.format(pid=process.pid))
        with open(path + ".tmp", "w", encoding="utf-8") as out:
            out.write(data)
        os.replace(path + ".tmp", path)

    def status(self) -> dict:
        """The two most recent cycles with gaps, every worker's counts merged, newest first."""
        by_key: dict[str, dict] = {}
        for cycle in [*self._published(), *self.recent()]:
            merged = by_key.setdefault(cycle["cycle"], {"cycle": cycle["cycle"], "first_at": cycle["first_at"],
                                                         "last_at": cycle["last_at"], **{g: {} for g in GAPS},
                                                         "jobs_not_in_snapshot": []})
            merged["first_at"] = min(merged["first_at"], cycle["first_at"])
            merged["last_at"] = max(merged["last_at"], cycle["last_at"])
            for gap in GAPS:
                for verb, count in cycle[gap].items():
                    merged[gap][verb] = merged[gap].get(verb, 0) + count
            for job in cycle["jobs_not_in_snapshot"]:
                if job not in merged["jobs_not_in_snapshot"] and len(merged["jobs_not_in_snapshot"]) < EXAMPLE_JOBS:
                    merged["jobs_not_in_snapshot"].append(job)
        cycles = sorted(by_key.values(), key=lambda c: c["last_at"], reverse=True)[:2]
        for cycle in cycles:
            cycle["advice"] = [ADVICE[gap] for gap in GAPS if cycle[gap]]
        return {"cycles": cycles}

    def _published(self) -> list[dict]:
        """The cycles other workers published (this worker's own come from memory)."""
        directory = os.environ.get(metrics.MULTIPROC_ENV)
        if not directory:
            return []
        found = []
        for path in glob.glob(os.path.join(directory, FILE_PATTERN.format(pid="*"))):
            try:
                with open(path, encoding="utf-8") as stream:
                    data = json.load(stream)
            except (OSError, ValueError):
                continue  # replaced while read, or a worker died mid-write: its next flush rewrites it
            if data.get("pid") != process.pid:
                found.extend(data.get("cycles", ()))
        return found


_tracker: "weakref.ref[SessionGaps] | None" = None


def _publish_this(tracker: SessionGaps) -> None:
    """Make ``tracker`` the one this process publishes at each metrics flush (one app per worker)."""
    global _tracker
    if _tracker is None:
        metrics.on_flush(_publish)
    _tracker = weakref.ref(tracker)


def _publish() -> None:
    tracker = _tracker() if _tracker is not None else None
    if tracker is not None:
        tracker.publish()


def late_open_watch(config: Any) -> Callable[[Any], None]:
    """A request-finished callback: WARNING and a count for an onSessionOpen slower than Volcano waits."""
    limit = config.volcano_timeout

    def watch(record: Any) -> None:
        if record.verb != ON_SESSION_OPEN or record.status not in (200, 409) or not limit or record.seconds <= limit:
            return
        metrics.count_late_open()
        if record.status == 409:  # superseded: a later open or close was stored first, this one was not
            log.warning("onSessionOpen took %.3f s to receive and store (%d bytes), longer than volcano_timeout "
                        "%.3f s, and was not stored: Volcano had closed that cycle and opened the next "
                        "meanwhile (counted as sessions_total{event=\"superseded\"}). Raise "
                        "extender.httpTimeout (docs/operations.md, 'Choosing extender.httpTimeout') and set "
                        "volcano_timeout to the same value", record.seconds, record.body_bytes, limit,
                        extra={"verb": "onSessionOpen", "seconds": round(record.seconds, 3),
                               "volcano_timeout": limit})
            return
        log.warning(
            "onSessionOpen took %.3f s to receive and store (%d bytes), longer than volcano_timeout "
            "%.3f s: Volcano gave up on it and logged the open as failed, so for this cycle it either "
            "skipped the extender (extender.ignorable: false) or called it while the snapshot was "
            "still being stored (ignorable: true). Raise extender.httpTimeout (docs/operations.md, "
            "'Choosing extender.httpTimeout') and set volcano_timeout to the same value",
            record.seconds, record.body_bytes, limit,
            extra={"verb": "onSessionOpen", "seconds": round(record.seconds, 3), "volcano_timeout": limit})
    return watch
