"""Hot reload: keep each worker's policy set equal to the policy directories, all or nothing.

One ``PolicyReloader`` per process (per gunicorn worker, started after fork). It loads the
directories once, synchronously, in ``start()``, then a daemon thread polls them every
``interval`` seconds (woken sooner by inotify when available, or by ``request_reload()`` from a
SIGHUP handler). A changed snapshot (``watch.read_snapshot``, consistent across a kubelet
``..data`` swap) is compiled in full; only a set that compiles without a single error is handed
to ``on_change``. On any error the last good set stays active, every error is logged with its
``file:line:column``, ``on_error`` is told, and the status says why; the next good edit recovers
by itself. The reloader never decides when a new set takes effect for a scheduling cycle: the
service activates it and the session store pins a version at onSessionOpen.

A reloader that has never loaded a good set (a worker that boots while the files are broken: a
crashed worker's replacement, SIGHUP to the gunicorn master) asks ``fallback()`` for the sources
of the last good set its instance served (``versions.LastGoodCopy``) and serves that, still
reporting the failed load (``last_reload_ok`` false, the errors). Only an instance that never
had a good set stays not ready.

A snapshot without a single policy file (a ConfigMap mounted with the wrong key, a typo in
``policy_dirs``) is a failed load like a set that does not compile, unless ``allow_empty``
(``allow_empty_policy_set``) says an empty set is intended.

``ReloadStatus`` is the one object ``/readyz``, ``/status`` and the metrics read.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable

from policy_extender.policyset.compile import SUFFIXES, compile_sources
from policy_extender.policyset.files import ConcurrentUpdate, ReadError, read_snapshot
from policy_extender.policyset.watch import DirectoryWatcher

log = logging.getLogger("policy_extender.reload")

DEFAULT_DIRS = ("policies",)
DEFAULT_INTERVAL = 5.0
DEFAULT_SUFFIXES = SUFFIXES
#: After an inotify event, wait this long so a burst of events (a kubelet update) is read once.
SETTLE_SECONDS = 0.05


@dataclass(frozen=True)
class ReloadStatus:
    """What the service reports about its policies. Immutable: each change makes a new one."""

    #: directories watched
    dirs: tuple[str, ...] = ()
    #: version (content hash) of the active policy set; None until a first good set loads
    version: str | None = None
    #: unix time the active set was loaded
    loaded_at: float | None = None
    #: file names of the active set
    files: tuple[str, ...] = ()
    #: whether the last reload attempt succeeded (False before any attempt)
    last_reload_ok: bool = False
    #: unix time of the last attempt, successful or not
    last_attempt_at: float | None = None
    #: unix time of the last successful reload
    last_success_at: float | None = None
    #: every error of the last failed attempt, each ``file:line:col: message``; empty when ok
    errors: tuple[str, ...] = ()
    #: content digest of the last snapshot attempted (the active one when last_reload_ok)
    attempted_digest: str | None = None
    reloads_ok: int = 0
    reloads_failed: int = 0
    #: the active set is the instance's last good copy, not one this reloader loaded from the
    #: directories (they were broken when it started)
    from_last_good: bool = False
    #: whether inotify wakes the poller (otherwise polling alone)
    inotify: bool = False
    interval: float = DEFAULT_INTERVAL

    @property
    def ready(self) -> bool:
        """A good policy set is loaded (the last attempt may still have failed)."""
        return self.version is not None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, for ``/status``."""
        return {**asdict(self), "ready": self.ready}


def render_errors(exc: BaseException) -> tuple[str, ...]:
    """Every diagnostic of a failed compile: ``file:line:col: error[CODE]: message``, the
    source line with a caret, and the hint (``errors.Diagnostic.render``)."""
    diagnostics = getattr(exc, "diagnostics", None)
    if not diagnostics:
        return (str(exc) or type(exc).__name__,)
    sources = getattr(exc, "sources", {}) or {}
    return tuple(render_diagnostic(d, sources) for d in diagnostics)


def render_diagnostic(diagnostic: Any, sources: dict[str, str]) -> str:
    render = getattr(diagnostic, "render", None)
    if not callable(render):
        return str(diagnostic)
    span = getattr(diagnostic, "span", None)
    return render(sources.get(getattr(span, "file", None)))  # type: ignore[arg-type]  # None finds no source


class PolicyReloader:
    """Loads the policy directories and keeps them loaded; see the module docstring.

    ``interval`` <= 0 turns watching off: the directories are loaded once in ``start`` and then
    only on ``reload_now``/``request_reload``.

    ``on_change(policy_set)`` is called (from the reloader's thread, or the caller of
    ``start``/``reload_now``) with each new good set; ``on_error(status)`` after each failed
    attempt that reports new errors; ``on_status(status)`` after every change of the status
    (feed the metrics from it). All must be quick and must not raise; an exception from
    ``on_change`` counts as a failed reload and the previous set stays active.

    ``fallback()`` returns the sources of the instance's last good set (or None); while no good
    set is loaded, a failed load compiles them and hands the set to ``on_restore`` (default
    ``on_change``) instead: see the module docstring.
    """

    def __init__(
        self,
        dirs: list[str] | tuple[str, ...] = DEFAULT_DIRS,
        interval: float = DEFAULT_INTERVAL,
        on_change: Callable[[Any], None] | None = None,
        on_error: Callable[[ReloadStatus], None] | None = None,
        *,
        on_status: Callable[[ReloadStatus], None] | None = None,
        fallback: Callable[[], dict[str, str] | None] | None = None,
        on_restore: Callable[[Any], None] | None = None,
        compile: Callable[[dict[str, str]], Any] = compile_sources,
        suffixes: tuple[str, ...] = DEFAULT_SUFFIXES,
        allow_empty: bool = False,
        inotify: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._dirs = [str(d) for d in dirs]
        self._interval = interval
        self._on_change = on_change or (lambda ps: None)
        self._on_error = on_error or (lambda status: None)
        self._on_status = on_status or (lambda status: None)
        self._fallback = fallback
        self._on_restore = on_restore or self._on_change
        self._fallback_failed = False
        self._compile = compile
        self._suffixes = suffixes
        self._allow_empty = allow_empty
        self._use_inotify = inotify
        self._clock = clock
        self._status = ReloadStatus(dirs=tuple(self._dirs), interval=interval)
        self._policy_set = None
        self._reload_lock = threading.Lock()
        self._wake = threading.Event()
        self._force = False
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._watcher: DirectoryWatcher | None = None

    @property
    def status(self) -> ReloadStatus:
        return self._status

    @property
    def policy_set(self):
        """The last good policy set, or None."""
        return self._policy_set

    def start(self) -> "PolicyReloader":
        """Load once now (a broken set leaves the status not ready, never raises), then watch."""
        self.reload_now()
        if self._use_inotify and self._interval > 0:
            self._watcher = DirectoryWatcher(self._dirs, self._wake_soon)
            watching = self._watcher.start()
            self._set_status(inotify=watching)
            if watching:  # an edit between the first load and the watch would wait an interval
                self.poll()
        self._thread = threading.Thread(target=self._run, name="policy-reloader", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        if self._watcher:
            self._watcher.stop()
        if self._thread:
            self._thread.join(timeout=5)

    def reload_now(self) -> ReloadStatus:
        """Re-read and recompile now, even if the content looks unchanged (SIGHUP)."""
        self.poll(force=True)
        return self._status

    def request_reload(self) -> None:
        """Ask the reloader thread to ``reload_now``; safe to call from a signal handler."""
        self._force = True
        self._wake.set()

    def poll(self, force: bool = False) -> bool:
        """Read the directories; compile and swap if they changed. True when a new set went live."""
        with self._reload_lock:
            try:
                snapshot = read_snapshot(self._dirs, self._suffixes)
            except ConcurrentUpdate as err:
                log.warning("policy directories changing, will read again: %s", err)
                return False
            except ReadError as err:
                self._fail(None, (str(err),))
                return False
            if not force and snapshot.digest == self._status.attempted_digest:
                return False
            return self._load(snapshot)

    def _load(self, snapshot) -> bool:
        if not any(name.endswith(".policy") for name in snapshot.files) and not self._allow_empty:
            return self._fail(snapshot.digest, (self._empty_set_error(),))
        try:
            policy_set = self._compile(snapshot.sources())
        except ReadError as err:
            return self._fail(snapshot.digest, (str(err),))
        except Exception as err:  # PolicyError carries every diagnostic; anything else is a bug
            if not getattr(err, "diagnostics", None):
                log.exception("compiling the policy set crashed")
            return self._fail(snapshot.digest, render_errors(err))
        try:
            self._on_change(policy_set)
        except Exception as err:
            log.exception("policy set %s compiled but could not be activated", _version(policy_set))
            return self._fail(snapshot.digest, (f"activating the policy set failed: {err!r}",))
        self._succeed(snapshot, policy_set)
        return True

    def _empty_set_error(self) -> str:
        patterns = ", ".join(f"*{suffix}" for suffix in self._suffixes if suffix.endswith(".policy"))  # values alone are no set
        return (f"{', '.join(self._dirs)}: no policy file ({patterns}) in the policy set: an empty set would "
                "let every node fit and decide nothing, so it is not loaded. Is the ConfigMap mounted with "
                "the right keys, and policy_dirs spelled right? If an empty set is intended, set "
                "allow_empty_policy_set: true")

    def _succeed(self, snapshot, policy_set) -> None:
        now = self._clock()
        previous = self._status.version
        self._policy_set = policy_set
        self._set_status(
            version=_version(policy_set) or snapshot.digest[:16], loaded_at=now,
            files=tuple(sorted(snapshot.files)), last_reload_ok=True, last_attempt_at=now, last_success_at=now, errors=(),
            attempted_digest=snapshot.digest, reloads_ok=self._status.reloads_ok + 1, from_last_good=False,
        )
        log.info("policy set %s loaded (was %s) from %s: %s", self._status.version, previous,
                 ", ".join(self._dirs), ", ".join(self._status.files) or "no files")

    def _fail(self, digest: str | None, errors: tuple[str, ...]) -> bool:
        status = self._status
        repeated = digest is None and errors == status.errors and not status.last_reload_ok
        self._set_status(
            last_reload_ok=False, last_attempt_at=self._clock(), errors=errors,
            attempted_digest=digest, reloads_failed=status.reloads_failed + (not repeated),
        )
        if not repeated:
            kept = f"keeping policy set {status.version}" if status.ready else "not ready"
            log.error("policy reload failed with %d error(s), %s:\n%s", len(errors), kept, "\n".join(errors))
            self._on_error(self._status)
        if not self._status.ready:
            self._restore_last_good()
        return False

    def _restore_last_good(self) -> None:
        """Serve the instance's last good set while the directories do not load (never raises)."""
        if self._fallback is None or self._fallback_failed:
            return
        try:
            sources = self._fallback()
            if sources is None:
                return  # this instance never had a good set: stay not ready
            policy_set = self._compile(sources)
            self._on_restore(policy_set)
        except Exception as err:
            self._fallback_failed = True  # the same copy would fail again: not retried
            log.error("the last good policy set of this instance does not load either (%s); "
                      "not ready until the policy directories are fixed",
                      "; ".join(render_errors(err)))
            return
        self._policy_set = policy_set
        self._set_status(version=_version(policy_set) or "last-good", loaded_at=self._clock(),
                         files=tuple(sorted(sources)), from_last_good=True)
        log.warning("serving policy set %s, the last good set of this instance, until the policy "
                    "directories %s load again (their errors are above and in /status)",
                    self._status.version, ", ".join(self._dirs))
        self._on_error(self._status)

    def _set_status(self, **changes: Any) -> None:
        self._status = replace(self._status, **changes)
        try:
            self._on_status(self._status)
        except Exception:
            log.exception("on_status callback failed")

    def _wake_soon(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        while not self._stopping.is_set():
            woken = self._wake.wait(self._interval if self._interval > 0 else None)
            if self._stopping.is_set():
                return
            if woken and not self._force:
                time.sleep(SETTLE_SECONDS)
            self._wake.clear()
            force, self._force = self._force, False
            try:
                self.poll(force=force)
            except Exception:  # never let the poller die: the next poll may succeed
                log.exception("policy reload crashed; polling continues")


def _version(policy_set: Any) -> str | None:
    return getattr(policy_set, "version", None)


def install_sighup(reloader: PolicyReloader) -> None:
    """Make SIGHUP to this process reload its policies (call from the process's main thread).

    Under gunicorn call it in ``post_worker_init`` (gunicorn resets worker signal handlers
    before that); SIGHUP to the gunicorn master instead restarts every worker gracefully, and
    each new worker loads the directories when it starts.
    """

    signal.signal(signal.SIGHUP, lambda signum, frame: reloader.request_reload())
