"""What a verb handler reads and writes of one worker's state: ``WorkerState``, the part of
``service.Service`` (a higher layer) that the handlers use, as a Protocol mypy checks
``Service`` against wherever a handler is given one (``web.dispatch``, the fixture runner)."""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence

from policy_extender.decide.session_gaps import SessionGaps
from policy_extender.decide.tallying import DecisionTally
from policy_extender.session.cache import SessionCache
from policy_extender.session.store import SessionStore


class Settings(Protocol):
    """What the handlers read of the worker's ``config.Config``."""

    @property
    def require_session(self) -> bool: ...

    @property
    def volcano_timeout(self) -> float: ...


class LoadedSet(Protocol):
    """What the session verbs read of a ``policy_set.PolicySet`` (which this module cannot name:
    it imports the verb table, whose session verbs take a ``WorkerState``)."""

    @property
    def version(self) -> str: ...

    @property
    def sources(self) -> dict[str, str]: ...

    @property
    def reads(self) -> dict[str, frozenset]: ...


class PolicyVersions(Protocol):
    """The loaded policy sets (``policyset.versions.PolicyStore``)."""

    @property
    def current(self) -> LoadedSet | None: ...

    def pinned(self, version: str, sources_of: Callable[[str], dict[str, str] | None]) -> LoadedSet: ...


class PolicyLoadStatus(Protocol):
    """Why no policy set is loaded (``policyset.reload.ReloadStatus``)."""

    @property
    def errors(self) -> Sequence[str]: ...


class WorkerState(Protocol):
    """One worker's policies, session store and cache, tally and the calls without a session.
    Read-only but for ``decided_with``, the one thing a handler writes."""

    #: (policy set, env) of the last call with a session (``handlers.policy_and_env``)
    decided_with: tuple[Any, Any]

    @property
    def config(self) -> Settings: ...

    @property
    def policies(self) -> PolicyVersions: ...

    @property
    def sessions(self) -> SessionStore: ...

    @property
    def session_cache(self) -> SessionCache: ...

    @property
    def session_gaps(self) -> SessionGaps | None:
        """Calls without a session, per cycle; None outside a served app."""

    @property
    def tally(self) -> DecisionTally: ...

    @property
    def policy_status(self) -> PolicyLoadStatus: ...
