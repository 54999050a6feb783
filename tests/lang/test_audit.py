"""Audit (shadow) rules: the `audit` modifier and the file-level `audit` marker parse, check and
format; an audited rule never takes part in a decision; policy_extender/decide/audit.py says what it
would have decided, per kind, and never raises."""

from __future__ import annotations

import pytest

from policy_extender.decide import audit
from policy_extender.errors import PolicyError
from policy_extender.lang.formatter import format_source
from policy_extender.policyset import compile_sources
from policy_extender.wire.views import NO_SESSION


def test_the_modifier_and_the_file_marker_mark_rules_audited():
    ps = compile_sources({
        "a.policy": 'filter zone: node.labels.zone != "b"\nfilter zone-next: node.labels.zone != "c"\n    audit\n',
        "b.policy": "# shadow file\naudit\nenqueue cap-next: job.min_available <= 3\nready r-next: true\n"})
    assert {r.name: r.audit for r in ps.rules} == {"zone": False, "zone-next": True, "cap-next": True,
                                                    "r-next": True}
    assert [r.name for r in ps.audited["filter"]] == ["zone-next"]
    assert sorted(ps.audited) == ["enqueue", "filter", "ready"]


def test_an_audited_rule_never_decides():
    ps = compile_sources({"a.policy": 'filter zone-next: node.labels.zone != "c"\n    audit\n'
                                      "enqueue cap-next: job.min_available <= 3 audit\n"
                                      "overused o-next: true audit\nready r-next: false audit\n"})
    node = _node({"zone": "c"})
    assert ps.predicate(_task(), node, NO_SESSION).fits
    job = _job(9)
    assert ps.enqueueable(job, NO_SESSION).status == 0
    assert ps.overused(_queue(), NO_SESSION).value is False
    assert ps.ready(job, NO_SESSION).value is True
    found = audit.predicate(ps, _task(), node, NO_SESSION)
    assert [(a.rule, a.outcome) for a in found] == [("zone-next", "reject")]
    assert found[0].reason.startswith('zone-next (a.policy:1): node.labels.zone "c"')
    assert [(a.rule, a.outcome) for a in audit.enqueueable(ps, job, NO_SESSION)] == [("cap-next", "reject")]
    assert [(a.rule, a.outcome) for a in audit.enqueueable(ps, _job(2), NO_SESSION)] == [("cap-next", "pass")]
    assert [(a.rule, a.outcome) for a in audit.overused(ps, _queue(), NO_SESSION)] == [("o-next", "overused")]
    assert [(a.rule, a.outcome) for a in audit.ready(ps, job, NO_SESSION)] == [("r-next", "not_ready")]


def test_when_false_is_skip_and_an_evaluation_error_is_an_outcome_not_an_exception():
    ps = compile_sources({"a.policy": 'filter f: node.labels.zone != "c"\n    when false\n    audit\n'
                                      "filter boom: node.idle.gpu * 9000000000000000000 > 0\n    audit\n"})
    found = {a.rule: a for a in audit.predicate(ps, _task(), _node({}, gpu=3), NO_SESSION)}
    assert found["f"].outcome == "skip"
    assert found["boom"].outcome == "error"
    assert "E510" in found["boom"].reason or "2^63" in found["boom"].reason, found["boom"].reason
    assert ps.predicate(_task(), _node({}, gpu=3), NO_SESSION).fits  # the answer stands


def test_permit_rules_and_victims_and_scores():
    ps = compile_sources({"a.policy": "enqueue vip-next: job.min_available >= 5 permit audit\n"
                                      'victim keep-batch: evictee.labels.kind != "batch" audit\n'
                                      "score spread: node.idle.gpu weight 10 audit\n"})
    assert [(a.rule, a.outcome) for a in audit.enqueueable(ps, _job(9), NO_SESSION)] == [("vip-next", "permit")]
    assert [(a.rule, a.outcome) for a in audit.enqueueable(ps, _job(1), NO_SESSION)] == [("vip-next", "abstain")]
    evictees = [_task("e1", {"kind": "batch"}), _task("e2", {})]
    assert audit.as_fixture(audit.victims(ps, ("victim", "preemptable"), _task(), evictees, NO_SESSION)) == {
        "keep-batch": {"e1": "protect", "e2": "evict"}}
    assert ps.victims("preemptable", _task(), evictees, NO_SESSION).status == 0  # no enforced rule
    nodes = [_node({}, "n1", gpu=1), _node({}, "n2", gpu=3)]
    assert audit.as_fixture(audit.prioritize(ps, _task(), nodes, NO_SESSION)) == {"spread": {"n1": 10.0, "n2": 30.0}}
    assert ps.prioritize(_task(), nodes, NO_SESSION).scores == {"n1": 0.0, "n2": 0.0}


def test_without_audit_rules_nothing_is_evaluated():
    ps = compile_sources({"a.policy": 'filter zone: node.labels.zone != "b"\n'})
    assert ps.audited == {}
    assert audit.predicate(ps, None, None, None) == ()  # returns before touching the views
    assert audit.victims(ps, ("victim", "preemptable"), None, None, None) == ()


@pytest.mark.parametrize("source, message", [
    ('filter a: true\naudit\n', "'audit' alone on a line marks the whole file and must come before the first rule"),
    ("audit\naudit\nfilter a: true\n", "the file is already marked audit at line 1"),
    ("audit\nfilter a: true\n    audit\n", "the whole file is marked audit (line 1): this 'audit' changes nothing"),
    ("filter a: true\n    audit\n    audit\n", "'audit' is given twice"),
])
def test_misplaced_audit_is_an_error_with_where_and_how(source, message):
    with pytest.raises(PolicyError) as caught:
        compile_sources({"a.policy": source})
    assert message in caught.value.render()
    assert "a.policy:" in caught.value.render()


def test_fmt_keeps_audit():
    source = "audit\nfilter a: node.name != \"x\"\n    audit\n"
    with pytest.raises(PolicyError):  # redundant audit in an audited file is refused...
        compile_sources({"a.policy": source})
    text = "# shadow\naudit\n\nfilter a:   node.name != 'x'\n"
    formatted = format_source("a.policy", text)
    assert formatted == "# shadow\naudit\n\nfilter a: node.name != 'x'\n"
    one = format_source("b.policy", "filter b: node.name != 'x'   audit\n")
    assert one == "filter b: node.name != 'x'\n    audit\n"
    assert compile_sources({"b.policy": one}).rules[0].audit


# -- small views -------------------------------------------------------------------------------

def _task(name="t0", labels=None):
    from policy_extender.wire.decode import decode_predicate
    import json
    body = {"task": {"UID": name, "Job": "", "NodeName": "", "Name": name,
                     "Pod": {"metadata": {"labels": labels or {}}}}, "node": {"Name": "n"}}
    return decode_predicate(json.dumps(body).encode(), {"task": frozenset({("Name",), ("Pod", "metadata", "labels")})}).task


def _node(labels, name="n", gpu=0):
    from policy_extender.wire.decode import decode_predicate
    import json
    body = {"task": {"UID": "t", "Job": "", "NodeName": ""},
            "node": {"Name": name, "Node": {"metadata": {"labels": labels}},
                     "Idle": {"MilliCPU": 0, "Memory": 0, "ScalarResources": {"nvidia.com/gpu": gpu * 1000}}}}
    reads = {"node": frozenset({("Name",), ("Node", "metadata", "labels"), ("Idle",)})}
    return decode_predicate(json.dumps(body).encode(), reads).node


def _job(min_available):
    from policy_extender.wire.decode import decode_job
    import json
    body = {"job": {"UID": "j", "Queue": "q", "MinAvailable": min_available, "Name": "j", "Namespace": "ns"}}
    return decode_job(json.dumps(body).encode(), {"job": frozenset({("MinAvailable",)})}).job


def _queue():
    from policy_extender.wire.decode import decode_queue
    import json
    return decode_queue(json.dumps({"queue": {"UID": "q", "Name": "q"}}).encode(), {}).queue
