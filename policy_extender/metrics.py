"""Prometheus metrics for ``/metrics``, correct under gunicorn's several worker processes.

The service calls plain functions: :func:`observe_request`, :func:`count_decision`,
:func:`set_policy_status`, :func:`count_session`, :func:`note_session_gap`, :func:`count_late_open`,
and :func:`render` for the ``/metrics`` route.
The gunicorn configuration calls :func:`on_starting` and :func:`child_exit`.

Multiprocess mode. ``prometheus_client`` picks how it stores values (in memory, or in one mmap
file per process under ``PROMETHEUS_MULTIPROC_DIR``) once, when it is first imported. So this
module imports it lazily, inside functions: :func:`on_starting` (in the gunicorn master, before
any worker forks) sets the directory first, and every worker then writes its own files.
:func:`render` sums the files of every process with a ``MultiProcessCollector``; without the
variable (tests, ``policy-extender serve`` in one process) it renders the in-process registry.

Batching. Writing a multiprocess value takes a lock and an mmap write per value (about 9 us for
one request's histograms and counters); the service instead calls :func:`note_request` with a
call's values (the verb dispatch, once per verb call), which adds the six values to
this process's flat list of pending calls (no lock: ``list.extend`` with a tuple is atomic; strings
and numbers, which the garbage collector does not track), and a flusher thread per process folds
them into tallies (:func:`fold`, in C passes over one slice per field) and writes those into the
prometheus values every ``FLUSH_SECONDS``, at :func:`flush` (``/metrics`` in this worker, the
gunicorn ``worker_exit`` hook, interpreter exit), and whenever ``FOLD_AT`` calls wait. A scrape
waits ``FLUSH_SECONDS`` first, so it sees every call answered before it began; a SIGKILLed worker
loses at most the last ``FLUSH_SECONDS`` of its counts (its earlier counts stay).
:func:`observe_request` and :func:`count_decision` still write at once.

Gauges say how the processes' values combine (``multiprocess_mode``); the ``live*`` modes drop a
worker's values once :func:`child_exit` has marked it dead. Counters and histograms of a dead
worker stay counted, as Prometheus counters must never go down.
"""

from __future__ import annotations

import atexit
import bisect
import glob
import operator
import os
import threading
import time
from collections import Counter
from contextlib import suppress
from dataclasses import dataclass, field
from itertools import compress
from typing import Any

from policy_extender import process
from policy_extender.instance import METRICS_DIR
from policy_extender.instance import METRICS_ENV as MULTIPROC_ENV
from policy_extender.instance import process_runtime_dir
from policy_extender.verb_names import kube_scheduler

PREFIX = "policy_extender_"

#: Seconds: a predicate takes milliseconds; an onSessionOpen up to seconds on large clusters, to
#: compare with ``extender.httpTimeout`` (1s shipped and Volcano's default; its docs use 100ms).
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

#: Bytes: a predicate body is ~100-200 KB, a snapshot tens to hundreds of MB.
BODY_BUCKETS = tuple(float(1024 * 4**n) for n in range(0, 11))  # 1 KiB .. 1 GiB

SESSION_EVENTS = ("opened", "closed", "expired", "replaced", "lost", "resynced", "superseded")

#: Seconds between two writes of a worker's pending tallies into the prometheus values.
FLUSH_SECONDS = 0.25


@dataclass
class Metrics:
    """Every metric of the service, in one registry, plus caches of labelled children."""

    registry: Any
    request_seconds: Any
    request_bytes: Any
    requests: Any
    decisions: Any
    sessions: Any
    reload_ok: Any
    reload_success_time: Any
    policy_errors: Any
    policy_info: "PolicyInfo"
    calls_without_session: Any
    calls_job_not_in_session: Any
    session_open_late: Any
    audit_decisions: Any
    tally_flush_failures: Any
    body_maps: Any
    connections_closed: Any
    rules_not_called: Any = None
    children: dict = field(default_factory=dict)


def build() -> Metrics:
    """Create the metrics. The first call in a process imports ``prometheus_client``."""
    # prometheus_client is imported only here and below, never at module level: it picks
    # in-memory or multiprocess values when first imported, from PROMETHEUS_MULTIPROC_DIR, which
    # ``on_starting`` sets in the master before any worker exists (see _refuse_mixed_mode).
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

    _refuse_mixed_mode()
    registry = CollectorRegistry(auto_describe=True)
    verb = ("verb",)
    by_protocol = ("verb", "protocol")  # protocol: the scheduler that called (protocol_of)
    return Metrics(
        registry=registry,
        request_seconds=Histogram(PREFIX + "request_duration_seconds",
                                  "Time to answer one scheduler call, from body read to response.",
                                  by_protocol, buckets=LATENCY_BUCKETS, registry=registry),
        request_bytes=Histogram(PREFIX + "request_body_bytes", "Size of request bodies.",
                                by_protocol, buckets=BODY_BUCKETS, registry=registry),
        requests=Counter(PREFIX + "requests", "Scheduler calls answered, by verb kind, protocol and HTTP status.",
                         ("verb", "protocol", "code"), registry=registry),
        decisions=Counter(PREFIX + "decisions", "Decisions by verb kind, protocol, deciding rule and outcome.",
                          ("verb", "protocol", "rule", "outcome"), registry=registry),
        sessions=Counter(PREFIX + "sessions", "Scheduling sessions opened, closed, expired or replaced (never closed).",
                         ("event",), registry=registry),
        reload_ok=Gauge(PREFIX + "policy_last_reload_successful",
                        "1 if every live worker's last policy load succeeded, else 0.",
                        registry=registry, multiprocess_mode="livemin"),
        reload_success_time=Gauge(PREFIX + "policy_last_reload_success_timestamp_seconds",
                                  "Unix time of the last successful policy load (oldest live worker).",
                                  registry=registry, multiprocess_mode="livemin"),
        policy_errors=Gauge(PREFIX + "policy_errors",
                            "Diagnostics of the last policy load (highest among live workers).",
                            registry=registry, multiprocess_mode="livemax"),
        policy_info=PolicyInfo(registry),
        calls_without_session=Counter(PREFIX + "calls_without_session",
                                      "Calls answered while no session was open (rules saw no snapshot).",
                                      verb, registry=registry),
        calls_job_not_in_session=Counter(PREFIX + "calls_job_not_in_session",
                                         "Task calls whose job is not in the open session's snapshot.",
                                         verb, registry=registry),
        session_open_late=Counter(PREFIX + "session_open_late",
                                  "onSessionOpens that took longer than volcano_timeout: Volcano gave up on them.",
                                  registry=registry),
        audit_decisions=Counter(PREFIX + "audit_decisions",
                                "Would-be decisions of audit (shadow) rules, by rule and outcome; they change no answer.",
                                ("rule", "outcome"), registry=registry),
        rules_not_called=Gauge(PREFIX + "rules_not_called",
                               "Rules of the set whose verb Volcano has not called in the last rules_not_called_cycles "
                               "cycles (its conf may not register the verb), by verb; set at each onSessionOpen.",
                               ("verb",), registry=registry, multiprocess_mode="livemostrecent"),
        tally_flush_failures=Counter(PREFIX + "tally_flush_failures",
                                     "Flushes of a worker's decision tally that the session store did not take (that tally is lost).",
                                     registry=registry),
        body_maps=Counter(PREFIX + "body_maps", "Request bodies of 32 MiB and more, by the memory they were received "
                          "into: new (mapped for the body) or kept (an earlier body's, keep_body_maps).",
                          ("source",), registry=registry),
        connections_closed=Counter(PREFIX + "connections_closed",
                                   "Connections a worker closed (answered 503) before their request arrived whole, "
                                   "by the bound they were closed to keep: memory (body_memory: the slowest "
                                   "first) or connections (worker_connections: the oldest first).",
                                   ("bound",), registry=registry),
    )


def _refuse_mixed_mode() -> None:
    """Fail loudly when the directory was set after prometheus_client chose in-memory values."""
    from prometheus_client import values

    if os.environ.get(MULTIPROC_ENV) and not getattr(values.ValueClass, "_multiprocess", False):
        raise RuntimeError(
            f"{MULTIPROC_ENV} was set after prometheus_client was imported, so this process "
            "would keep metrics in memory and /metrics would miss them; set the variable before "
            "the process starts (the Dockerfile does) or call metrics.on_starting() first")


_lock = threading.Lock()
_metrics: Metrics | None = None


def metrics() -> Metrics:
    """This process's metrics, built on first use (after a fork, the copy the worker inherited)."""
    global _metrics
    if _metrics is None:
        with _lock:
            if _metrics is None:
                _metrics = build()
    return _metrics


def _child(metric: Any, *labels: str) -> Any:
    """``metric.labels(*labels)``, cached: the label lookup costs more than the write."""
    key = (id(metric), labels)
    child = metrics().children.get(key)
    if child is None:
        child = metrics().children[key] = metric.labels(*labels)
    return child


# ---------------------------------------------------------------------------------------------
# what the service calls


def observe_request(verb: str, status_code: int, seconds: float, body_bytes: int) -> None:
    """One answered scheduler call (``verb`` is the verb kind, such as ``predicate``)."""
    children = metrics().children.get((verb, status_code)) or _request_children(verb, status_code)
    seconds_child, bytes_child, count_child = children
    seconds_child.observe(seconds)
    bytes_child.observe(body_bytes)
    count_child.inc()


def _request_children(verb: str, status_code: int) -> tuple:
    m = metrics()
    protocol = protocol_of(verb)
    children = m.children[(verb, status_code)] = (
        _child(m.request_seconds, verb, protocol), _child(m.request_bytes, verb, protocol),
        _child(m.requests, verb, protocol, str(status_code)))
    return children


#: the ``protocol`` label of each verb kind that is not Volcano's
_PROTOCOLS = dict.fromkeys(kube_scheduler.VERB_KINDS, kube_scheduler.PROTOCOL)


def protocol_of(verb: str) -> str:
    """The scheduler whose verb kind ``verb`` is: ``kube-scheduler`` or ``volcano``."""
    return _PROTOCOLS.get(verb, "volcano")


def count_decision(verb: str, rule: str, outcome: str) -> None:
    """One decision: ``count_decision("predicate", "zone-match", "reject")``.

    Outcomes by verb kind: predicate ``reject``; preemptable/reclaimable ``evict`` (once per
    victim, with the victim rule) or ``reject``; jobEnqueueable ``permit``/``reject``/``abstain``;
    queueOverused ``overused``/``not_overused``; jobReady ``ready``/``not_ready``. ``rule`` is
    the deciding rule's name, or ``""`` for the neutral default.
    """
    _child(metrics().decisions, verb, protocol_of(verb), rule, outcome).inc()


# ---------------------------------------------------------------------------------------------
# batched: what the service calls on every verb call


_LATENCY_BOUNDS = (*LATENCY_BUCKETS, float("inf"))
_BODY_BOUNDS = (*BODY_BUCKETS, float("inf"))


class _Pending:
    """This process's calls not yet written: ``calls``, a flat list of ``FIELDS`` values per verb
    call, extended without a lock (``list.extend`` with a tuple is atomic); gaps and audits -> count."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list = []  # verb, status, seconds, body_bytes, rule, decision; verb, ...
        self.fold_lock = threading.Lock()
        self.gaps: dict[tuple[str, str], int] = {}
        self.audits: dict[tuple[str, str], int] = {}
        self.decisions: dict[tuple[str, str, str], int] = {}
        self.flusher_pid: int | None = None

    def waiting(self) -> int:
        """How many calls wait for the next fold."""
        return len(self.calls) // FIELDS

    def take(self) -> tuple[dict, dict, dict, dict]:
        """(verb, status) -> tallies, (verb, rule, outcome) -> decisions, gaps, audits; emptied."""
        with self.fold_lock:
            batch = take_all(self.calls)
        with self.lock:
            gaps, audits, counted = self.gaps, self.audits, self.decisions
            self.gaps, self.audits, self.decisions = {}, {}, {}
        requests, decisions = fold(batch)
        for key, count in counted.items():
            decisions[key] = decisions.get(key, 0) + count
        return requests, decisions, gaps, audits


def take_all(items: list) -> list:
    """Every item of a list that other threads append to (or extend) without a lock, removed: a
    slice and a ``del`` of the same length, one C call each, so what is added meanwhile lands
    after them and stays for the next take (the session tally takes its calls the same way)."""
    n = len(items)
    taken = items[:n]
    del items[:n]
    return taken


#: values kept per call in ``_Pending.calls``: verb, status, seconds, body_bytes, rule, decision
FIELDS = 6


def fold(calls: list) -> tuple[dict, dict]:
    """Calls, ``FIELDS`` values each in one flat list (verb, status, seconds, body_bytes, rule,
    decision; a decision of "" counts none) -> ((verb, status) -> [calls, seconds sum, calls per
    latency bucket, bytes sum, calls per body-size bucket], (verb, rule, outcome) -> decisions).

    Every pass over the calls runs in C: a column is a slice with a step (``calls[0::6]``), no
    attribute read per call; then ``sorted``, ``compress``, ``sum``, ``Counter``; a bucket's count
    is found by bisecting the sorted values at its bounds. Sums add in call order from zero, as
    one-by-one updates would. The flat list holds only strings and numbers, which the garbage
    collector does not track, and the columns are six lists: a fold never starts a collection."""
    if not calls:
        return {}, {}
    verbs, statuses, seconds, sizes, rules, outcomes = (calls[i::FIELDS] for i in range(FIELDS))
    n = len(verbs)
    if verbs.count(verbs[0]) == n and statuses.count(statuses[0]) == n:  # the common case
        groups: list = [((verbs[0], statuses[0]), seconds, sizes)]
    else:
        groups = []
        for key in dict.fromkeys(zip(verbs, statuses)):  # a tuple per distinct key only
            verb, status = key
            mine = list(map(operator.and_, map(verb.__eq__, verbs), map(status.__eq__, statuses)))
            groups.append((key, list(compress(seconds, mine)), list(compress(sizes, mine))))
    requests = {key: [len(mine_seconds), sum(mine_seconds, 0.0), _per_bucket(mine_seconds, _LATENCY_BOUNDS),
                      sum(mine_sizes, 0.0), _per_bucket(mine_sizes, _BODY_BOUNDS)]
                for key, mine_seconds, mine_sizes in groups}
    decisions = dict(Counter(compress(zip(verbs, rules, outcomes), outcomes)))
    return requests, decisions


def _per_bucket(values: list, bounds: tuple) -> list[int]:
    """How many values fall in each bucket, as ``bisect_left(bounds, value)`` assigns them (a
    bucket holds the values above the previous bound up to its own, the last all the rest)."""
    ordered = sorted(values)
    counts, below = [], 0
    for bound in bounds[:-1]:
        upto = bisect.bisect_right(ordered, bound)
        counts.append(upto - below)
        below = upto
    counts.append(len(ordered) - below)
    return counts


#: calls kept unfolded at most: past it the calling thread flushes them (a flusher that cannot
#: keep up must not grow the list without bound); the flusher takes ~FLUSH_SECONDS of calls
FOLD_AT = 20000


_pending = _Pending()
#: values of pending calls past which :func:`note_request` flushes them in the calling thread
CALLS_AT_MOST = FOLD_AT * FIELDS


def note_request(verb: str, status_code: int, seconds: float, body_bytes: int,
                 rule: str = "", outcome: str = "") -> None:
    """``observe_request`` (and ``count_decision`` when ``outcome``), batched (module docstring):
    the call's values added to the pending list here, folded into tallies when the flusher takes
    them (:func:`fold`). The decision of a non-200 answer (a refusal, a failure) is not counted.
    The verb dispatch (``web.dispatch``) calls it once per verb call."""
    if status_code != 200:
        rule = outcome = ""
    pending = _pending
    if pending.flusher_pid != process.pid:  # a forked child: its flusher is not running
        start_flusher()
    calls = pending.calls
    calls.extend((verb, status_code, seconds, body_bytes, rule, outcome))  # one atomic extend
    if len(calls) >= CALLS_AT_MOST:
        flush()


#: gap kind (decide.session_gaps) -> the counter it adds to
_GAP_COUNTERS = {"no_session": "calls_without_session", "job_not_in_snapshot": "calls_job_not_in_session"}


def note_session_gap(gap: str, verb: str) -> None:
    """A call without a session (``no_session``) or whose job is not in the snapshot
    (``job_not_in_snapshot``), batched like :func:`note_request`."""
    if gap not in _GAP_COUNTERS:
        raise ValueError(f"session gap {gap!r} is not one of {', '.join(_GAP_COUNTERS)}")
    pending = _pending
    if pending.flusher_pid != process.pid:
        start_flusher()
    with pending.lock:
        pending.gaps[(gap, verb)] = pending.gaps.get((gap, verb), 0) + 1


def note_decisions(verb: str, counts: dict[tuple[str, str], int]) -> None:
    """Several decisions of one call, ``(rule, outcome) -> count`` (kube-scheduler's filter: one
    per node rejected), batched like :func:`note_request`."""
    pending = _pending
    if pending.flusher_pid != process.pid:
        start_flusher()
    with pending.lock:
        for (rule, outcome), count in counts.items():
            key = (verb, rule, outcome)
            pending.decisions[key] = pending.decisions.get(key, 0) + count


def note_audits(audits) -> None:
    """Audit rules' would-be outcomes (``policy_extender.decide.audit.Audited``; ``skip`` not counted),
    batched like :func:`note_request`."""
    pending = _pending
    if pending.flusher_pid != process.pid:
        start_flusher()
    with pending.lock:
        for a in audits:
            if a.outcome != "skip":
                k = (a.rule, a.outcome)
                pending.audits[k] = pending.audits.get(k, 0) + 1


def set_rules_not_called(counts: dict[str, int], verbs) -> None:
    """The rules each of ``verbs`` (those serving the set's rules) leaves uncalled: 0 for the others."""
    gauge = metrics().rules_not_called
    for verb in verbs:
        gauge.labels(verb=verb).set(counts.get(verb, 0))


def note_tally_failure() -> None:
    """A worker's tally flush that the session store did not take."""
    metrics().tally_flush_failures.inc()


_flush_hooks: list = []


def on_flush(hook) -> None:
    """Call ``hook()`` after every flush of this process's tallies (in the flusher thread too)."""
    _flush_hooks.append(hook)


def flush() -> None:
    """Write this process's pending tallies into the prometheus values now."""
    requests, decisions, gaps, audits = _pending.take()
    for (rule, outcome), count in audits.items():
        _child(metrics().audit_decisions, rule, outcome).inc(count)
    for (gap, verb), count in gaps.items():
        _child(getattr(metrics(), _GAP_COUNTERS[gap]), verb).inc(count)
    for hook in list(_flush_hooks):
        try:
            hook()
        except Exception:  # a status file that cannot be written must not stop the metrics
            pass
    for (verb, status_code), (calls, seconds, latency, size, sizes) in requests.items():
        seconds_child, bytes_child, count_child = \
            metrics().children.get((verb, status_code)) or _request_children(verb, status_code)
        _add_to_histogram(seconds_child, seconds, latency)
        _add_to_histogram(bytes_child, size, sizes)
        count_child.inc(calls)
    for (verb, rule, outcome), count in decisions.items():
        _child(metrics().decisions, verb, protocol_of(verb), rule, outcome).inc(count)


def _add_to_histogram(child: Any, total: float, per_bucket: list[int]) -> None:
    """What ``child.observe(v)`` does for each value, for many values at once (same buckets:
    a test pins this against ``observe``)."""
    child._sum.inc(total)
    for bucket, count in zip(child._buckets, per_bucket):
        if count:
            bucket.inc(count)


def start_flusher() -> None:
    """This process's flusher thread (again after a fork: threads do not survive it)."""
    with _lock:
        if _pending.flusher_pid == process.pid:
            return
        if _pending.flusher_pid is None:
            atexit.register(flush)
        _pending.flusher_pid = process.pid
        threading.Thread(target=_flush_forever, name="policy-extender-metrics", daemon=True).start()


def _flush_forever() -> None:
    pid = process.pid
    while _pending.flusher_pid == pid:
        time.sleep(FLUSH_SECONDS)
        try:
            flush()
        except Exception:  # a metrics failure must never stop the worker; the next turn retries
            pass


def count_session(event: str) -> None:
    """A session ``opened``, ``closed``, ``expired`` (never closed, forgotten after the session
    TTL), ``replaced`` (never closed, a new onSessionOpen came first), ``lost`` (a worker found
    its session gone from the store without an end: the store restarted empty or its file was
    replaced), ``resynced`` (a worker found the store's history of the session different from
    the one it applied, e.g. a failover lost writes, and read it again) or ``superseded`` (an
    onSessionOpen not stored because an open or close that arrived after it was stored first)."""
    if event not in SESSION_EVENTS:
        raise ValueError(f"session event {event!r} is not one of {', '.join(SESSION_EVENTS)}")
    _child(metrics().sessions, event).inc()


def count_body_map(source: str) -> None:
    """A body of 32 MiB and more received into ``new`` memory or a ``kept`` map (``web.socket_body``)."""
    _child(metrics().body_maps, source).inc()


def count_connection_closed(bound: str) -> None:
    """A connection closed by a worker's event loop to keep ``memory`` (``body_memory``) or
    ``connections`` (``worker_connections``) bounded (``web.worker``)."""
    _child(metrics().connections_closed, bound).inc()


def count_late_open() -> None:
    """An onSessionOpen that took longer than Volcano's timeout (``volcano_timeout``)."""
    metrics().session_open_late.inc()


def set_policy_status(version: str | None, loaded_at: float, ok: bool, error_count: int) -> None:
    """After each policy load: the version now served, when, whether the load succeeded.

    A failed load keeps serving the previous version: pass that version (or None when nothing was
    ever loaded) with ``ok=False``; ``loaded_at`` is only recorded for a successful load.
    """
    m = metrics()
    m.reload_ok.set(1 if ok else 0)
    m.policy_errors.set(error_count)
    if ok:
        m.reload_success_time.set(loaded_at)
    _set_active_version(m, version)


def _set_active_version(m: Metrics, version: str | None) -> None:
    if m.policy_info.version != version:
        m.policy_info.publish(version)


#: a worker's served policy version, in the multiprocess directory (see ``PolicyInfo``)
VERSION_FILE = "policy-version-{pid}.txt"
POLICY_INFO_HELP = "1 for the policy version a live worker serves; two 1s mean workers disagree."


class PolicyInfo:
    """``policy_extender_policy_info{version=...} 1``: the versions live workers serve.

    Not a labelled prometheus gauge: in multiprocess mode prometheus_client keeps every key a
    process ever wrote (in its mmap file, the file's index and a module-level list of values),
    so a gauge labelled by version grew by a key per policy swap in every worker, for good
    (docs/reliability.md). Each worker instead writes the one version it serves to its own
    ``VERSION_FILE`` in the multiprocess directory (replaced whole); a scrape reads the files of
    the workers alive (:func:`child_exit` removes a dead worker's). In one process (no
    directory), the version is kept in memory. Either way an old version leaves no trace."""

    def __init__(self, registry: Any = None) -> None:
        self.version: str | None = None
        if registry is not None:
            registry.register(self)

    def describe(self) -> list:
        return []  # the family is built at each collect; nothing to check names against

    def publish(self, version: str | None) -> None:
        self.version = version
        directory = os.environ.get(MULTIPROC_ENV)
        if not directory:
            return
        path = os.path.join(directory, VERSION_FILE.format(pid=os.getpid()))
        if version is None:
            with suppress(FileNotFoundError):
                os.remove(path)
            return
        temporary = f"{path}.{threading.get_ident()}.tmp"  # two threads' loads never share one
        with open(temporary, "w", encoding="utf-8") as out:
            out.write(version)
        os.replace(temporary, path)

    def collect(self) -> list:
        """In this process: its own version. Under gunicorn use :func:`served_versions`."""
        return [_policy_info_family([self.version] if self.version is not None else [])]


def served_versions(directory: str) -> list[str]:
    """The versions the live workers' ``VERSION_FILE``s name, each once, sorted."""
    found = set()
    for path in glob.glob(os.path.join(glob.escape(directory), VERSION_FILE.format(pid="*"))):
        try:
            with open(path, encoding="utf-8") as stream:
                version = stream.read().strip()
        except OSError:  # the worker died and its file was removed while listed
            continue
        if version:
            found.add(version)
    return sorted(found)


def _policy_info_family(versions: list[str]) -> Any:
    from prometheus_client.core import GaugeMetricFamily

    family = GaugeMetricFamily(PREFIX + "policy_info", POLICY_INFO_HELP, labels=("version",))
    for version in versions:
        family.add_metric((version,), 1.0)
    return family


class _ServedVersions:
    """The multiprocess scrape's collector of ``policy_info`` (see ``PolicyInfo``)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def collect(self) -> list:
        return [_policy_info_family(served_versions(self.directory))]


def render() -> tuple[bytes, str]:
    """The exposition text for ``/metrics`` and its content type."""
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector

    flush()
    directory = os.environ.get(MULTIPROC_ENV)
    if not directory:
        return generate_latest(metrics().registry), CONTENT_TYPE_LATEST
    time.sleep(FLUSH_SECONDS * 1.2)  # every other worker's flusher has run since this scrape began
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=directory)
    registry.register(_ServedVersions(directory))
    return generate_latest(registry), CONTENT_TYPE_LATEST


# ---------------------------------------------------------------------------------------------
# gunicorn hooks (the master process)


def prepare_directory(directory: str | None = None) -> str:
    """Make ``PROMETHEUS_MULTIPROC_DIR`` an empty directory and export it; returns its path.

    Without the variable, the directory is ``metrics/`` in the instance's private runtime
    directory (``policy_extender.instance``; ``serve`` sets the variable to it before gunicorn
    starts), so two instances on one host never sum or wipe each other's files. Files left by a
    previous run would be summed into this one, so its ``*.db`` files and the workers'
    ``session-gaps-*.json`` and ``policy-version-*.txt`` (and only those: the variable might name
    a shared directory) are removed.
    """
    directory = directory or os.environ.get(MULTIPROC_ENV) or os.path.join(process_runtime_dir(), METRICS_DIR)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    for name in os.listdir(directory):
        if name.endswith(".db") or _is_worker_file(name):
            os.remove(os.path.join(directory, name))
    os.environ[MULTIPROC_ENV] = directory
    return directory


def _is_worker_file(name: str) -> bool:
    """A worker's own file in the metrics directory: its session gaps or its policy version."""
    return ((name.startswith("session-gaps-") and name.endswith(".json"))
            or (name.startswith("policy-version-") and name.endswith((".txt", ".tmp"))))


def on_starting(server: Any = None) -> None:
    """gunicorn ``on_starting`` hook: set up the multiprocess directory before workers fork."""
    directory = prepare_directory()
    _worker_exits()  # exported at 0 from the start, so the first exit is an increase
    if server is not None:
        server.log.info("metrics: multiprocess directory %s", directory)


def worker_exit(server: Any, worker: Any) -> None:
    """gunicorn ``worker_exit`` hook (in the exiting worker): write its pending tallies."""
    flush()


def child_exit(server: Any, worker: Any) -> None:
    """gunicorn ``child_exit`` hook: drop a dead worker's live gauges and policy version, count
    the exit."""
    mark_process_dead(worker.pid)
    counter = _worker_exits()
    if counter is not None:
        counter.inc()


_worker_exits_counter: Any = None


def _worker_exits() -> Any | None:
    """The master's own counter of reaped workers (it builds no other metric: a live gauge of the
    master would never be marked dead). Each exit while serving is a restart: gunicorn forks a
    replacement (a crash, a kill for memory, a timeout, SIGHUP to the master)."""
    global _worker_exits_counter
    if _worker_exits_counter is None:
        from prometheus_client import Counter, values
        if not (os.environ.get(MULTIPROC_ENV) and getattr(values.ValueClass, "_multiprocess", False)):
            return None  # not a gunicorn master with its metrics directory: nothing would read it
        _worker_exits_counter = Counter(PREFIX + "worker_exits", "Worker processes that exited and were "
                                        "replaced by the gunicorn master (crash, out of memory, timeout, "
                                        "SIGHUP to the master).", registry=None)
    return _worker_exits_counter


def mark_process_dead(pid: int) -> None:
    from prometheus_client import multiprocess

    directory = os.environ.get(MULTIPROC_ENV)
    if directory:
        multiprocess.mark_process_dead(pid, directory)
        with suppress(FileNotFoundError):
            os.remove(os.path.join(directory, VERSION_FILE.format(pid=pid)))
