"""Service: the long-lived state of one worker, kept in ``app.extensions["policy_extender"]``.

It owns the configuration, the policy versions (``policyset.versions.PolicyStore`` fed by a
``policyset.reload.PolicyReloader``), the shared session store and this worker's session cache, and the
request-finished callbacks that every verb call is reported to (``on_request_finished``; the
HTTP dispatch counts each call in the metrics and writes its log line itself).

Under ``serve`` it also gets the instance's private runtime directory (``instance.py``): each set
it activates from the policy directories is saved there (``policyset.versions.LastGoodCopy``), and a worker
that starts while the directories are broken serves that copy (docs/reload.md).
"""

from __future__ import annotations

import logging
import os
from typing import Any, Callable

import msgspec

from policy_extender import metrics
from policy_extender.config import Config
from policy_extender.decide.kube_table import KUBE_VERBS
from policy_extender.decide.session_gaps import SessionGaps
from policy_extender.decide.table import VERBS
from policy_extender.decide.tallying import DecisionTally
from policy_extender.decide.unserved import UnservedWatch
from policy_extender.instance import LAST_GOOD_FILE
from policy_extender.policyset.reload import PolicyReloader, ReloadStatus
from policy_extender.policyset.sets import policy_set_source
from policy_extender.policyset.versions import LastGoodCopy, PolicyStore
from policy_extender.record.capture import recorder_for
from policy_extender.session.cache import SessionCache
from policy_extender.session.factory import open_store
from policy_extender.session.lost import LOST_FILE, LostMarker, inherit_previous
from policy_extender.session.store import SessionStore
from policy_extender.wire import decode, node_reuse

log = logging.getLogger("policy_extender.web")


class RequestRecord(msgspec.Struct, frozen=True, gc=False):
    """What one verb call did: passed to every request-finished callback (one per call: a frozen
    msgspec Struct, built in C in a quarter of a NamedTuple's time)."""

    verb: str            # verb kind (predicate, ...), whatever its URL path
    status: int          # HTTP status answered
    decision: str        # outcome: fits / reject / scored / permit / abstain / ... / error
    rule: str            # the deciding rule, "" for a neutral answer
    seconds: float       # from the start of the body read to the encoded response
    body_bytes: int      # request body size
    error: str = ""      # the error message of a non-200 answer


RequestFinished = Callable[[RequestRecord], None]


def open_session_store(config: Config) -> SessionStore:
    """The shared store named by ``config.session_store`` (sqlite:PATH, redis://... or
    redis+sentinel://...)."""
    return open_store(config.session_store, ttl_seconds=config.session_ttl,
                      redis_timeout=config.redis_timeout, redis_wait_replicas=config.redis_wait_replicas,
                      redis_wait_timeout=config.redis_wait_timeout)


class Service:
    """One worker's policies, sessions and callbacks (see the module docstring)."""

    def __init__(self, config: Config, sessions: SessionStore | None = None, runtime_dir: str | None = None) -> None:
        self.config = config
        self.runtime_dir = runtime_dir
        node_reuse.configure(config.node_reuse_bytes)
        #: URL path -> verb kind: Volcano's verbs, and kube-scheduler's under ``kube_scheduler_prefix``
        self.routes: dict[str, str] = {**config.verb_paths(), **config.kube_scheduler_paths()}
        #: verb kind -> its body limit (``config.body_limit_for``, looked up once per kind)
        self.body_limits: dict[str, int] = {kind: config.body_limit_for(kind) for kind in self.routes.values()}
        self.policies = PolicyStore()
        self.last_good = LastGoodCopy(_last_good_path(runtime_dir)) if runtime_dir else None
        self.reloader = PolicyReloader(policy_set_source(config.policy_dirs, config.values_file).paths(),
                                       config.reload_interval,
                                       on_change=self._activate, on_restore=self._serve,
                                       on_status=_set_policy_metrics,
                                       fallback=self._last_good_sources if self.last_good else None,
                                       allow_empty=config.allow_empty_policy_set)
        self.sessions = sessions if sessions is not None else open_session_store(config)
        self.session_cache = _session_cache(self.sessions, runtime_dir)
        self.finished: list[RequestFinished] = []
        #: calls without a session, per cycle (decide/session_gaps.py); None outside a served app
        self.session_gaps: SessionGaps | None = None
        #: (policy set, env) of the last call with a session (decide.handlers.policy_and_env)
        self.decided_with: tuple[Any, Any] = (None, None)
        self.recorder = _recorder(config, self.policies, self.sessions)  # None unless --record
        self.tally = _tally(config, self.sessions)  # this worker's side of GET /why
        #: rules whose verb Volcano has not called in the last cycles (decide.unserved)
        self.unserved = UnservedWatch(min(config.rules_not_called_cycles, config.tally_cycles))

    def start(self) -> "Service":
        """Load the policies now (never raises: a bad set leaves /readyz at 503), then watch."""
        # interval 0: load once, then reload only on request (SIGHUP to this worker)
        self.reloader.start()
        return self

    def stop(self) -> None:
        """Stop this worker's threads: the reloader, the tally's flusher (after a last flush) and
        the recorder's writer."""
        self.reloader.stop()
        self.tally.close()
        if self.recorder is not None:
            self.recorder.close()

    @property
    def policy_status(self) -> ReloadStatus:
        return self.reloader.status

    def on_request_finished(self, callback: RequestFinished) -> RequestFinished:
        """Register ``callback(record)``, called after every verb call (usable as a decorator)."""
        self.finished.append(callback)
        return callback

    def report(self, record: RequestRecord) -> None:
        for callback in self.finished:
            try:
                callback(record)
            except Exception:  # a broken metrics hook must not fail the scheduler's call
                log.exception("request-finished callback %r failed", callback)

    def _activate(self, policy_set: Any) -> None:
        """A good set loaded from the policy directories: serve it, and keep it for later workers."""
        self._serve(policy_set)
        if self.last_good is not None:
            self.last_good.save(policy_set.version, policy_set.sources)

    def _serve(self, policy_set: Any) -> None:
        decode.prepare(policy_set.reads)  # before it serves: no request builds a decoder
        self.policies.activate(policy_set)

    def _last_good_sources(self) -> dict[str, str] | None:
        found = self.last_good.load() if self.last_good is not None else None
        return found[1] if found else None


def _session_cache(sessions: SessionStore, runtime_dir: str | None) -> SessionCache:
    """This worker's cache of the shared session (snapshot bytes -> views, records -> counts);
    under ``serve`` it shares what it learns of a lost session with the instance's other workers
    through the runtime directory (session/lost.py)."""
    marker = LostMarker(os.path.join(runtime_dir, LOST_FILE)) if runtime_dir else None
    if marker is not None and runtime_dir is not None:
        inherit_previous(runtime_dir, marker)  # a restart mid-cycle: that cycle's session is lost
    return SessionCache(sessions, on_event=_count_session_event, lost_marker=marker)


def _count_session_event(event: str) -> None:
    metrics.count_session(event)


def _recorder(config: Config, policies: PolicyStore, sessions: Any) -> Any:
    """The cycle recorder of ``--record DIR`` (replay/recorder.py), or None."""
    return recorder_for(config, policies, sessions)


def _tally(config: Config, sessions: SessionStore) -> DecisionTally:
    """This worker's decision tally (decide/tallying.py), flushed to ``sessions`` in the background."""
    return DecisionTally(sessions, [*VERBS.values(), *KUBE_VERBS.values()], keep_closed=config.tally_cycles,
                         max_entries=config.tally_max_entries, flush_seconds=config.tally_flush_seconds,
                         enabled=config.tally, on_failure=_count_tally_failure)


def _count_tally_failure() -> None:
    metrics.note_tally_failure()


def _last_good_path(runtime_dir: str) -> str:
    return os.path.join(runtime_dir, LAST_GOOD_FILE)


def _set_policy_metrics(status: ReloadStatus) -> None:
    """The policy gauges follow the reload status (every change of it)."""
    metrics.set_policy_status(status.version, status.last_success_at or 0.0, status.last_reload_ok,
                              len(status.errors))
