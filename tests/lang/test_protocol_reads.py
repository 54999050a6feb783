"""What a rule of a file serving kube-scheduler may read: only what kube-scheduler sends
(``schema.PROTOCOL_FIELDS``); anything else is E411 at the read (the exact messages are golden
cases in cases/errors.yaml). Files serving only Volcano read everything, as before."""

import json
import re
from pathlib import Path

import pytest

from policy_extender import schema
from policy_extender.errors import PolicyError
from policy_extender.policyset.compile import compile_sources

DOC = Path(__file__).parents[2] / "docs" / "language.md"
KUBE = "kube-scheduler"

#: rules reading something kube-scheduler never sends, each alone in a file: (rule, what is refused)
UNSENT_READS = [
    ("filter f: node.idle.gpu > 0", "node.idle"),
    ("filter f: free_gpu > 0", "node.idle"),
    ("filter f: free_memory > 0", "node.idle"),
    ("score s: node.used.cpu", "node.used"),
    ("score s: node.releasing.gpu", "node.releasing"),
    ("score s: node.pipelined.gpu", "node.pipelined"),
    ("score s: count(t for t in node.tasks)", "node.tasks"),
    ('filter f: task.role == "worker"', "task.role"),
    ('filter f: task.status == "Pending"', "task.status"),
    ("filter f: task.preemptable", "task.preemptable"),
    ('filter f: task.job_id != ""', "task.job_id"),
    ("filter f: task.job.min_available > 1", "task.job"),
    ('filter f: task.queue.name == "q"', "task.queue"),
    ("filter f: job.min_available > 1", "job"),
    ('score s: if queue.name == "q" then 1 else 0', "queue"),
    ("filter f: session.node.tasks < 3", "session"),
    ("filter f: session.open", "session"),
    ("victim v: evictee.preemptable", "evictee.preemptable"),
    ('preemptable p: evictor.job.name != ""', "evictor.job"),
    ("victim v: session.node.tasks > 1", "session"),
]

#: a rule of each kind kube-scheduler serves, reading everything it sends
SENT = """
filter every-node-field: node.name != "" and node.labels.zone != "x" and node.annotations.a != "x"
    and all(t.effect != "NoExecute" for t in node.taints) and not node.unschedulable
    and node.conditions.Ready == "True" and node.ready and node.allocatable.gpu >= task.requests.gpu
    and node.capacity.cpu > 0
filter every-task-field: task.uid != "" and task.name != "" and task.namespace != "" and task.labels.a != "x"
    and task.annotations.a != "x" and task.priority >= 0 and task.priority_class != "x"
    and task.init_requests.cpu >= 0 and task.node_selector.zone != "x" and task.best_effort != true
    and task.node_name == "" and all(t.key != "x" for t in task.tolerations)
score gpus: node.allocatable.gpu - task_gpu
    normalize 0 to 10
victim lower: evictee.priority < evictor.priority and evictee.labels.protected != "true"
preemptable same-namespace: evictee.namespace == evictor.namespace and evictee.requests.gpu > 0
"""


def refused(sources: dict[str, str]) -> list:
    with pytest.raises(PolicyError) as err:
        compile_sources(sources)
    return err.value.diagnostics


@pytest.mark.parametrize("rule,what", UNSENT_READS, ids=[r for r, _ in UNSENT_READS])
@pytest.mark.parametrize("protocols", ["kube-scheduler", "volcano, kube-scheduler"])
def test_a_read_kube_scheduler_never_sends_is_refused_at_the_read(protocols, rule, what):
    diagnostics = refused({"a.policy": f"protocol {protocols}\n{rule}\n"})
    assert [d.code for d in diagnostics] == ["E411"]
    assert f"{what} cannot be known" in diagnostics[0].message
    assert diagnostics[0].span.line == 2
    assert "serve this rule to volcano only" in diagnostics[0].hint


@pytest.mark.parametrize("rule", [r for r, _ in UNSENT_READS])
@pytest.mark.parametrize("header", ["", "protocol volcano\n"])
def test_a_file_serving_only_volcano_reads_everything(header, rule):
    assert compile_sources({"a.policy": f"{header}{rule}\n"}).rules


def test_everything_kube_scheduler_sends_can_be_read_by_each_kind_it_serves():
    kube = compile_sources({"a.policy": "protocol kube-scheduler\n" + SENT}).for_protocol(KUBE)
    assert kube.kinds == {"filter", "score", "victim", "preemptable"}


def test_a_let_is_checked_against_each_rule_that_uses_it_and_reported_once():
    source = "protocol kube-scheduler\nlet room = node.idle.cpu - task.requests.cpu\nfilter f: room > 0\nscore s: room\n"
    [diagnostic] = refused({"a.policy": source})
    assert (diagnostic.code, diagnostic.span.line, diagnostic.span.column) == ("E411", 2, 12)
    # an unused let reads nothing: only the rules that use one say what it must be able to read
    assert compile_sources({"a.policy": "protocol kube-scheduler\nlet room = node.idle.cpu\nfilter f: true\n"})


def test_the_file_guard_is_checked_against_the_rules():
    [diagnostic] = refused({"a.policy": "protocol kube-scheduler\nwhen task.job.min_available > 1\nfilter f: true\n"})
    assert (diagnostic.code, diagnostic.span.line, diagnostic.span.column) == ("E411", 2, 6)


def test_a_rule_of_a_kind_kube_scheduler_has_no_verb_for_is_refused_for_its_kind_not_its_reads():
    diagnostics = refused({"a.policy": "protocol volcano, kube-scheduler\nenqueue e: session.allocated.gpu < 8\n"})
    assert [d.code for d in diagnostics] == ["E410"]


def test_each_file_is_held_to_the_schedulers_it_serves():
    program = compile_sources({"kube.policy": "protocol kube-scheduler\nfilter k: node.allocatable.gpu > 0\n",
                               "volcano.policy": "filter v: node.idle.gpu > 0 and task.job.min_available > 0\n"})
    assert {r.name for r in program.for_protocol(KUBE).rules if KUBE in r.protocols} == {"k"}


def test_the_schema_table_names_real_fields_and_explains_every_gap():
    for protocol, types in schema.PROTOCOL_FIELDS.items():
        for type_name, fields in types.items():
            assert fields <= set(schema.TYPES[type_name]), (protocol, type_name)
    explained = set(schema.PROTOCOL_UNSENT[KUBE])
    for kind in schema.PROTOCOL_KINDS[KUBE]:
        for root, type_name in schema.DECISION_ROOTS[kind].items():
            if not schema.sends(KUBE, type_name):
                assert root in explained
            else:
                unsent = {f"{type_name}.{f}" for f in schema.TYPES[type_name] if not schema.sends(KUBE, type_name, f)}
                assert unsent <= explained, unsent - explained
    assert all(schema.sends("volcano", t, f) for t, fs in schema.TYPES.items() for f in fs)


def test_the_language_doc_lists_what_kube_scheduler_does_not_send():
    section = DOC.read_text(encoding="utf-8").split("### What each rule kind can see", 1)[1].split("\n### ", 1)[0]
    for key in schema.PROTOCOL_UNSENT[KUBE]:
        assert f"`{key.rsplit('.', 1)[-1]}`" in section, key
    listed = {kind for row in re.findall(r"^\| (.*?) \|", section, re.M) for kind in re.findall(r"`(\w+)`", row)}
    assert listed == set(schema.DECISION_ROOTS)


def test_every_field_kube_scheduler_sends_is_read_off_its_bodies():
    """The views of kube-scheduler's v1.Pod and v1.Node (``wire.kube``) give every field the
    table says it sends, so a rule the checker lets through reads a value, never fails."""
    from policy_extender.wire import compact
    from policy_extender.wire.kube import decode_extender_args, decode_preemption_args
    from policy_extender.wire.session_views import NO_SESSION
    request = decode_extender_args(json.dumps(compact.extender_args_body(
        {"name": "web-0", "labels": {"a": "y"}, "priority": 5, "requests": {"gpu": 1}},
        [{"name": "n1", "labels": {"zone": "a"}, "allocatable": {"gpu": 2}}])).encode())
    for type_name, view in (("task", request.task), ("node", request.nodes[0])):
        for name in schema.PROTOCOL_FIELDS[KUBE][type_name]:
            getattr(view, name)  # raises AttributeError when the view lacks it
    kube = compile_sources({"a.policy": "protocol kube-scheduler\n" + SENT}).for_protocol(KUBE)
    # decided (the compact node has no capacity: rejected) without an error reading any field
    assert kube.predicate(request.task, request.nodes[0], NO_SESSION).rule == "every-node-field"
    assert kube.prioritize(request.task, request.nodes, NO_SESSION).scores == {"n1": 0}
    preempt = decode_preemption_args(json.dumps(compact.preemption_args_body(
        {"name": "urgent-0", "priority": 10}, [{"name": "batch-0", "uid": "u0", "priority": 1,
                                               "requests": {"gpu": 1}}])).encode())
    assert kube.victims("preemptable", preempt.evictor, preempt.nodes[0].pods, NO_SESSION).victims == [0]
