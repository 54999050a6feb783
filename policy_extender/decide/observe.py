"""After a verb decided: its audit rules, their metric, and the decision tally (one call per verb).

The verb handler (``decide/handlers.py``) calls its verb's entry of ``AFTER`` (looked up once
per verb) after each decision, with what it decoded: it evaluates the set's audit (shadow)
rules of that verb (``audit.py``; nothing without any), counts their outcomes
(``policy_extender_audit_decisions_total``) and adds the call to this worker's tally
(``session/tally.py``; memory only, never the store). The tally keys on task and job
``Namespace``/``Name``, which every decoder keeps (``wire.paths.ALWAYS_READ``).
"""

from __future__ import annotations

from typing import Any

from policy_extender import metrics
from policy_extender.decide import audit
from policy_extender.logs import current_request_id
from policy_extender.verb_names.volcano import (JOB_ENQUEUEABLE, JOB_READY, PREDICATE, PREEMPTABLE, PRIORITIZE,
                                                QUEUE_OVERUSED, RECLAIMABLE)

def _head(env: Any) -> Any:
    return getattr(env, "head", None)


def _predicate(service, verb, policy_set, env, request, decision, outcome) -> None:
    audits = audit.predicate(policy_set, request.task, request.node, env)
    if audits:
        _count(audits)
    service.tally.record_predicate(_head(env), request.task, decision, audits, current_request_id())


def _prioritize(service, verb, policy_set, env, request, decision, outcome) -> None:
    audits = audit.prioritize(policy_set, request.task, request.nodes, env)
    if audits:
        _count(audits)
    service.tally.record_prioritize(_head(env), request.task, decision, audits, current_request_id())


def _victims(service, verb, policy_set, env, request, decision, outcome) -> None:
    audits = audit.victims(policy_set, verb, request.evictor, request.evictees, env)
    if audits:
        _count(audits)
    service.tally.record_victims(_head(env), verb, request.evictor, request.evictees, decision, audits,
                                 current_request_id())


def _enqueueable(service, verb, policy_set, env, request, decision, outcome) -> None:
    audits = audit.enqueueable(policy_set, request.job, env)
    if audits:
        _count(audits)
    service.tally.record_enqueue(_head(env), request.job, decision, outcome, audits, current_request_id())


def _overused(service, verb, policy_set, env, request, decision, outcome) -> None:
    audits = audit.overused(policy_set, request.queue, env)
    if audits:
        _count(audits)
    service.tally.record_overused(_head(env), request.queue, decision, audits, current_request_id())


def _ready(service, verb, policy_set, env, request, decision, outcome) -> None:
    audits = audit.ready(policy_set, request.job, env)
    if audits:
        _count(audits)
    service.tally.record_ready(_head(env), request.job, decision, audits, current_request_id())


#: deciding verb -> what is done after its decision: audit it, count it, tally it
#: (a test pins it to the verb table's deciding verbs)
AFTER = {PREDICATE: _predicate, PRIORITIZE: _prioritize, PREEMPTABLE: _victims, RECLAIMABLE: _victims,
         JOB_ENQUEUEABLE: _enqueueable, QUEUE_OVERUSED: _overused, JOB_READY: _ready}


def _count(audits) -> None:
    metrics.note_audits(audits)
