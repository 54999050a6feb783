"""The predicate's own handler (``handlers.decide_predicate``, the table's adapters written out)
answers, tallies, counts and refuses exactly as the generic ``deciding(VERBS["predicate"])``:
two services, each on its own store with the same session open, get the same bodies (the
sample, a rejection, a job missing from the snapshot, an audit rule's would-be rejection, and
hundreds of mutated bodies), in and out of a session and with ``require_session``."""

from __future__ import annotations

import copy
import json
import random

import pytest

from policy_extender import metrics
from policy_extender.decide import handlers
from policy_extender.decide.table import VERBS
from policy_extender.logs import bind_request_id, unbind_request_id
from tests.tools.wire_fuzz import mutate
from tests.support.app import post
from tests.support.bodies import sample, sample_json
from tests.support.policies import POLICIES

#: the test policies, a rule that reads the session (``require_session`` refuses without one)
#: and an audit rule that would reject what the enforced rules let through
WITH_AUDIT_AND_SESSION = {
    **POLICIES,
    "session.policy": 'filter queued: task.job.queue.name != "never"\n',
    "audit.policy": 'audit\nfilter next-zone: node.labels["topology.kubernetes.io/zone"] != "zone-c"\n'
                    '  reason "zone-c is being drained"\n',
}


def bodies(count: int) -> list[bytes]:
    """The sample, three edited on purpose, and ``count`` mutated ones (fixed seed)."""
    base = sample_json("predicate")
    rejected = copy.deepcopy(base)
    rejected["node"]["Node"]["metadata"]["labels"]["topology.kubernetes.io/zone"] = "zone-b"
    missing_job = copy.deepcopy(base)
    missing_job["task"]["Job"] = "ml/not-in-the-snapshot"
    no_job = copy.deepcopy(base)
    no_job["task"]["Job"] = ""
    rng = random.Random(20261123)
    mutated = [mutate(copy.deepcopy(base), rng) for _ in range(count)]
    return [sample("predicate"), *(json.dumps(b).encode() for b in (rejected, missing_job, no_job)), *mutated]


def outcome(handler, service, body: bytes, request_id: str):
    """What the handler answered (the Reply), or the error it raised (type and message)."""
    token = bind_request_id(request_id)
    try:
        return handler(service, body)
    except Exception as exc:  # WireError and the like: respond() answers these
        return type(exc).__name__, str(exc)
    finally:
        unbind_request_id(token)


def tallied(service) -> list:
    """The tally's cycles without their session ids (each service has its own store)."""
    return [(agg.counts, agg.firsts, agg.dropped) for agg in service.tally.take().values()]


def gaps(service) -> list:
    cycles = service.session_gaps.status()["cycles"]
    return [{k: v for k, v in cycle.items() if k not in ("cycle", "first_at", "last_at")} for cycle in cycles]


@pytest.mark.parametrize("open_session", [True, False], ids=["in-a-session", "no-session"])
@pytest.mark.parametrize("require_session", [False, True], ids=["lenient", "require-session"])
@pytest.mark.slow
def test_the_predicate_handler_is_the_generic_one_written_out(make_app, tmp_path, monkeypatch,
                                                              open_session, require_session):
    # no flush of the tallies while the calls run (on a loaded machine the two services'
    # flushers would each take a part of theirs at another call): both are read whole at the end
    apps = [make_app(WITH_AUDIT_AND_SESSION, require_session=require_session, tally_flush_seconds=3600,
                     session_store=f"sqlite:{tmp_path / name}.sqlite3") for name in ("fast", "generic")]
    services = [app.extensions["policy_extender"] for app in apps]
    if open_session:
        for app in apps:
            assert post(app.test_client(), "onSessionOpen").status_code == 200
    audited: dict[int, list] = {0: [], 1: []}
    which = [0]
    monkeypatch.setattr(metrics, "note_audits",
                        lambda audits: audited[which[0]].append([(a.rule, a.outcome) for a in audits]))
    generic = handlers.deciding(VERBS["predicate"])
    assert handlers.HANDLERS["predicate"] is handlers.decide_predicate
    answers = []
    for n, body in enumerate(bodies(300)):
        which[0] = 0
        fast = outcome(handlers.decide_predicate, services[0], body, f"r{n}")
        which[0] = 1
        slow = outcome(generic, services[1], body, f"r{n}")
        assert fast == slow, body[:200]
        answers.append(fast)
    assert audited[0] == audited[1]
    tallies = tallied(services[0])
    assert tallies == tallied(services[1])
    assert gaps(services[0]) == gaps(services[1])
    # the bodies reach every branch: fits, rejections, audits, errors, the gaps, the refusals
    replies = [a for a in answers if not isinstance(a, tuple)]
    refused = [a for a in answers if isinstance(a, tuple) and a[0] == "SessionRequired"]
    if require_session and not open_session:  # the set reads session data: every call refused
        assert len(refused) == len(answers)
        return
    assert {r.decision for r in replies if r.status == 200} == {"", "reject"}
    assert any(isinstance(a, tuple) and a[0] == "WireError" for a in answers)
    assert any(("next-zone", "reject") in call for call in audited[0])
    if open_session:
        assert gaps(services[0])[0]["jobs_not_in_snapshot"]
        assert tallies and tallies[0][0]  # the cycle's counts
        assert bool(refused) == require_session  # the task whose job the snapshot lacks


def test_a_closed_sessions_env_is_let_go_at_the_next_call_without_one(make_app):
    """The kept (policy set, env) pair must not hold a closed session's env (its decoded snapshot)
    once a call finds no session, as the session cache itself lets it go."""
    import gc
    import weakref

    app = make_app()
    client, service = app.test_client(), app.extensions["policy_extender"]
    assert post(client, "onSessionOpen").status_code == 200
    assert post(client, "predicate").status_code == 200
    kept = weakref.ref(service.decided_with[1])
    assert kept() is not None and kept().head is not None
    assert post(client, "onSessionClose", {}).status_code == 200
    assert post(client, "predicate").status_code == 200  # no session now
    gc.collect()
    assert service.decided_with == (None, None) and kept() is None
