"""The file-level ``protocol`` statement: which schedulers a file's rules serve, and what each
scheduler's policy set decides from (the checker's errors are golden cases in cases/errors.yaml)."""

from policy_extender.lang.formatter import format_source
from policy_extender.policyset.compile import compile_sources
from policy_extender.wire.views import NO_SESSION

ZONE = "filter zone: node.labels.zone == task.annotations.zone\n"
SOURCES = {
    "both.policy": "protocol volcano, kube-scheduler\n" + ZONE,
    "kube.policy": "protocol kube-scheduler\nfilter not-cordoned: not node.unschedulable\nscore one: 1\n",
    "volcano.policy": "filter gpu: node.labels.gpu != \"none\"\nready gang: job.ready_tasks >= job.min_available\n",
}


class View:
    def __init__(self, **fields):
        self.__dict__.update(fields)


def test_each_scheduler_decides_from_the_rules_of_the_files_that_serve_it():
    volcano = compile_sources(SOURCES)
    kube = volcano.for_protocol("kube-scheduler")
    assert volcano.protocol == "volcano" and kube.protocol == "kube-scheduler"
    assert volcano.kinds == {"filter", "ready"}
    assert kube.kinds == {"filter", "score"}
    assert kube.version == volcano.version and kube.sources == volcano.sources
    # every rule is listed by both, with the schedulers it serves
    assert {r.name: r.protocols for r in kube.rules} == {r.name: r.protocols for r in volcano.rules} == {
        "zone": {"volcano", "kube-scheduler"}, "not-cordoned": {"kube-scheduler"}, "one": {"kube-scheduler"},
        "gpu": {"volcano"}, "gang": {"volcano"}}
    task = View(annotations={"zone": "a"})
    cordoned = View(name="n1", labels={"zone": "a", "gpu": "none"}, unschedulable=True)
    # the cordoned node only fails kube-scheduler's rule; the "none" GPU label only Volcano's
    assert volcano.predicate(task, cordoned, NO_SESSION).rule == "gpu"
    assert kube.predicate(task, cordoned, NO_SESSION).rule == "not-cordoned"
    other_zone = View(name="n2", labels={"zone": "b", "gpu": "a100"}, unschedulable=False)
    assert volcano.predicate(task, other_zone, NO_SESSION).rule == "zone"
    assert kube.predicate(task, other_zone, NO_SESSION).rule == "zone"
    assert kube.prioritize(task, [other_zone], NO_SESSION).scores == {"n2": 1.0}
    assert volcano.prioritize(task, [other_zone], NO_SESSION).scores == {"n2": 0.0}


def test_the_protocol_sets_are_built_once_and_lead_back():
    volcano = compile_sources(SOURCES)
    kube = volcano.for_protocol("kube-scheduler")
    assert volcano.for_protocol("kube-scheduler") is kube
    assert kube.for_protocol("volcano") is volcano


def test_a_file_without_the_statement_serves_volcano_only():
    volcano = compile_sources({"v.policy": ZONE})
    assert volcano.kinds == {"filter"}
    assert volcano.for_protocol("kube-scheduler").kinds == frozenset()


def test_fmt_prints_the_statement_in_one_canonical_form():
    assert format_source("a.policy", "protocol   volcano ,kube-scheduler  # both\n\n" + ZONE) == (
        "protocol volcano, kube-scheduler  # both\n\n" + ZONE)
