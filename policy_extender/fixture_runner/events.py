"""A fixture session's ``events:`` as the calls Volcano's Statement makes
(``pkg/scheduler/framework/statement.go``), checked against the session snapshot.

=====================  =====================================================================
event                  what the service is sent
=====================  =====================================================================
``allocate: T``        allocateFunc with the snapshot's task T, ``NodeName`` = ``node:``,
``node: N``            status Allocated (``Statement.Allocate``; ``Pipeline`` sends the same)
``deallocate: T``      deallocateFunc with T as it was allocated, status Pending
                       (``unallocate``): undoes an earlier allocate event
``evict: T``           deallocateFunc with T on the node it runs on in the snapshot, status
                       Releasing (``Statement.Evict``): T counts -1 on its node, job and queue
``discard``            undoes this statement's allocate and evict events, last first
                       (``Statement.Discard``): an allocate by deallocateFunc (``unallocate``),
                       an evict by allocateFunc with T Running on its node (``unevict``)
``commit``             nothing (``Statement.Commit`` binds and evicts without calling the
                       extender); ends the statement, so a later discard does not undo it
=====================  =====================================================================

A statement is the allocate and evict events since the start, the last ``discard`` or the last
``commit``. A task is named by its name, ``namespace/name`` or uid, and must be a task of the
snapshot (of a job's ``tasks`` or a node's ``tasks``): Volcano's events carry the session's own
TaskInfo. Every event the service could not have been sent this way (an unknown task, a node
not in the snapshot, allocating a task that already runs, evicting one that runs nowhere,
deallocating one never allocated, a discard with nothing to undo) is a FixtureError at the
event's ``file:line:col``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, NoReturn

from policy_extender.verb_names.volcano import ALLOCATE, DEALLOCATE

from .model import Event, FixtureError

#: Volcano's TaskStatus numbers (``pkg/scheduler/api/types.go``) of the states events leave a task in.
PENDING, ALLOCATED, RUNNING, RELEASING = 1, 2, 32, 64
#: How many task names an "is not in the session" error lists.
NAMES_SHOWN = 8


@dataclass
class _Placed:
    """A task that this cycle's events moved: allocated (onto ``body``'s node) or evicted."""

    kind: str  # "allocate" or "evict"
    body: dict
    event: Event


def calls(snapshot: Any, events: Iterable[Event]) -> list[tuple[str, dict]]:
    """(verb, body) for each call the events make, in order."""
    tasks, nodes = SessionTasks(snapshot), _node_names(snapshot)
    moved: dict[str, _Placed] = {}
    statement: list[str] = []  # uids of the moves the open statement made, in order
    out: list[tuple[str, dict]] = []
    for event in events:
        if event.kind == "commit":
            statement.clear()
        elif event.kind == "discard":
            if not statement:
                _fail(event, "nothing to discard: no allocate or evict event since the start of the "
                      "session, the last discard or the last commit (a discard undoes the events of "
                      "its statement, last first)")
            for uid in reversed(statement):
                placed = moved.pop(uid)
                if placed.kind == "allocate":  # unallocate
                    out.append((DEALLOCATE, {**placed.body, "Status": PENDING}))
                else:  # unevict
                    out.append((ALLOCATE, {**placed.body, "Status": RUNNING}))
            statement.clear()
        else:
            task = tasks.find(event)
            uid = task["UID"]
            if event.kind == "allocate":
                body = _allocate(event, task, moved.get(uid), nodes)
                out.append((ALLOCATE, body))
                moved[uid] = _Placed("allocate", body, event)
                statement.append(uid)
            elif event.kind == "deallocate":
                placed = _deallocate(event, moved.get(uid))
                out.append((DEALLOCATE, {**placed.body, "Status": PENDING}))
                del moved[uid]
                if uid in statement:
                    statement.remove(uid)
            else:
                body = _evict(event, task, moved.get(uid))
                out.append((DEALLOCATE, body))
                moved[uid] = _Placed("evict", body, event)
                statement.append(uid)
    return out


def _allocate(event: Event, task: dict, placed: _Placed | None, nodes: set[str]) -> dict:
    if placed is not None:
        _fail(event, f"task {event.task!r} was already {_moved_words(placed)}: "
              + ("deallocate it (or discard) before allocating it again" if placed.kind == "allocate"
                 else "an evicted task is not allocated again in the same cycle; a discard unevicts it"))
    if task.get("NodeName"):
        _fail(event, f"task {event.task!r} already runs on {task['NodeName']} in the session snapshot: "
              "allocate places a pending task (give it no `node:` in the session); `evict` takes a "
              "running one off its node")
    if event.node not in nodes:
        raise FixtureError(event.node_mark or event.mark, f"allocate event: node {event.node!r} is not in the "
                           "session: allocate places a task on a node of the snapshot "
                           f"({_listed(sorted(nodes), 'nodes')})", column=True)
    return {**task, "NodeName": event.node, "Status": ALLOCATED}


def _deallocate(event: Event, placed: _Placed | None) -> _Placed:
    if placed is None:
        _fail(event, f"task {event.task!r} is not allocated in this cycle: deallocate undoes an earlier "
              "allocate event; to take off a task that ran before the cycle, write `evict`")
    if placed.kind != "allocate":
        _fail(event, f"task {event.task!r} was {_moved_words(placed)}: deallocate undoes an allocate "
              "event; a discard unevicts an evicted task")
    return placed


def _evict(event: Event, task: dict, placed: _Placed | None) -> dict:
    if placed is not None:
        _fail(event, f"task {event.task!r} was already {_moved_words(placed)}: "
              + ("`deallocate` undoes an allocation of this cycle; evict takes off a task that ran "
                 "before it" if placed.kind == "allocate" else "a task is evicted once (a discard unevicts it)"))
    if not task.get("NodeName"):
        _fail(event, f"task {event.task!r} runs on no node in the session snapshot: only a task on a "
              "node can be evicted; give it `node:` in the session (or list it in a node's `tasks:`)")
    return {**task, "Status": RELEASING}


def _moved_words(placed: _Placed) -> str:
    mark = placed.event.mark
    what = f"allocated on {placed.body.get('NodeName')}" if placed.kind == "allocate" else "evicted"
    return f"{what} by the event at line {mark.line}"


def _fail(event: Event, message: str) -> NoReturn:
    raise FixtureError(event.mark, f"{event.kind} event: {message}", column=True)


def _listed(names: list[str], what: str) -> str:
    if not names:
        return f"this session has no {what}"
    shown = ", ".join(names[:NAMES_SHOWN]) + (f", ... ({len(names)} in all)" if len(names) > NAMES_SHOWN else "")
    return f"the session's {what}: {shown}"


def _node_names(snapshot: Any) -> set[str]:
    nodes = snapshot.get("Nodes") if isinstance(snapshot, dict) else None
    return set(nodes) if isinstance(nodes, dict) else set()


class SessionTasks:
    """The snapshot's tasks (each job's ``Tasks``, then each node's), found by uid,
    ``namespace/name`` or name."""

    def __init__(self, snapshot: Any) -> None:
        self.by_uid: dict[str, dict] = {}
        for task in _snapshot_tasks(snapshot):
            self.by_uid.setdefault(task["UID"], task)

    def find(self, event: Event) -> dict:
        ref = event.task
        if ref in self.by_uid:
            return self.by_uid[ref]
        found = [t for t in self.by_uid.values()
                 if ref == f"{t.get('Namespace')}/{t.get('Name')}" or ref == t.get("Name")]
        if len(found) == 1:
            return found[0]
        if found:
            both = ", ".join(sorted(f"{t.get('Namespace')}/{t.get('Name')} (uid {t['UID']})" for t in found))
            _fail(event, f"{len(found)} tasks of the session are named {ref!r} ({both}): name it by "
                  "namespace/name or uid")
        names = sorted({_shown_name(t) for t in self.by_uid.values()})
        _fail(event, f"task {ref!r} is not in the session: an event names a task of the session's jobs "
              f"or nodes by name, namespace/name or uid ({_listed(names, 'tasks')})")


def _shown_name(task: dict) -> str:
    namespace = task.get("Namespace") or "default"
    return task.get("Name") if namespace == "default" else f"{namespace}/{task.get('Name')}"  # type: ignore[return-value]  # a task has a name


def _snapshot_tasks(snapshot: Any) -> Iterable[dict]:
    if not isinstance(snapshot, dict):
        return
    for group in ("Jobs", "Nodes"):
        owners = snapshot.get(group)
        for owner in (owners.values() if isinstance(owners, dict) else ()):
            tasks = owner.get("Tasks") if isinstance(owner, dict) else None
            for task in (tasks.values() if isinstance(tasks, dict) else ()):
                if isinstance(task, dict) and isinstance(task.get("UID"), str):
                    yield task
