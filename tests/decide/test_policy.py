"""PolicySet: the API the service, fixture runner and reload use, on real files and sample bodies."""

import os
from pathlib import Path

import pytest

from policy_extender.errors import EvalError, PolicyError
from policy_extender.policyset import compile_sources, load_directories
from policy_extender.wire import decode
from policy_extender.wire.views import NO_SESSION

from tests.support.bodies import SAMPLES
REPO = Path(__file__).parents[2]
DESIGN_CARD = "filter node.labels.zone == task.annotations.zone\nscore 10 * free_gpu\n"


def _sample(name: str) -> bytes:
    path = SAMPLES / f"{name}.json"
    if not path.exists():
        pytest.skip(f"{path} is not available")
    return path.read_bytes()


def test_design_card_lines_decide_on_the_sample_predicate():
    ps = compile_sources({"design-card.policy": DESIGN_CARD})
    request = decode.decode_predicate(_sample("predicate"), ps.reads, NO_SESSION)
    # the sample node has no plain "zone" label and the task no "zone" annotation: null == null
    assert ps.predicate(request.task, request.node, NO_SESSION).fits


def test_design_card_lines_decide_on_the_sample_prioritize():
    ps = compile_sources({"design-card.policy": DESIGN_CARD})
    request = decode.decode_prioritize(_sample("prioritize"), ps.reads, NO_SESSION)
    decision = ps.prioritize(request.task, request.nodes, NO_SESSION)
    idle = {n.name: n.idle.gpu for n in request.nodes}
    assert decision.scores == {name: 10.0 * gpus for name, gpus in idle.items()}
    assert decision.per_rule == {"design-card.policy:2": decision.scores}


def test_a_zone_mismatch_on_the_sample_is_explained():
    ps = compile_sources({"zone.policy": 'filter zone-match: node.labels["topology.kubernetes.io/zone"] == "zone-a"\n'})
    request = decode.decode_predicate(_sample("predicate"), ps.reads, NO_SESSION)
    decision = ps.predicate(request.task, request.node, NO_SESSION)
    zone = request.node.labels["topology.kubernetes.io/zone"]
    assert (decision.fits, decision.code, decision.rule) == (False, 2, "zone-match")
    assert decision.reason == f'zone-match (zone.policy:1): node.labels["topology.kubernetes.io/zone"] "{zone}" != "zone-a"'


def test_the_example_policies_load_as_one_set_and_decide_every_sample():
    ps = load_directories([REPO / "policies"])
    assert ps.kinds == {"filter", "score", "victim", "preemptable", "reclaimable", "enqueue", "overused", "ready"}
    assert {"design-card.policy:4", "design-card.policy:7"} <= {r.name for r in ps.rules}
    predicate = decode.decode_predicate(_sample("predicate"), ps.reads, NO_SESSION)
    assert ps.predicate(predicate.task, predicate.node, NO_SESSION).code in (0, 2, 3)
    victims = decode.decode_victims(_sample("preemptable"), ps.reads, NO_SESSION)
    decision = ps.victims("preemptable", victims.evictor, victims.evictees, NO_SESSION)
    assert decision.status in (0, 1) and all(0 <= i < len(victims.evictees) for i in decision.victims)
    job = decode.decode_job(_sample("jobReady"), ps.reads, NO_SESSION).job
    assert ps.ready(job, NO_SESSION).value in (True, False)


def test_rules_record_kind_and_position():
    ps = compile_sources({"a.policy": "filter f: true\n\nscore s: 1\n    weight 2\n"})
    assert [(r.name, r.kind, r.file, r.line, r.column) for r in ps.rules] == \
        [("f", "filter", "a.policy", 1, 1), ("s", "score", "a.policy", 3, 1)]


def test_version_is_a_content_hash():
    a = compile_sources({"a.policy": "filter true\n"})
    assert len(a.version) == 16 and int(a.version, 16) >= 0
    assert a.version == compile_sources({"a.policy": "filter true\n"}).version
    assert a.version != compile_sources({"a.policy": "filter false\n"}).version
    assert a.version != compile_sources({"b.policy": "filter true\n"}).version
    assert a.sources == {"a.policy": "filter true\n"}


def test_reads_list_the_wire_paths_of_used_fields():
    ps = compile_sources({"a.policy": "filter node.labels.zone == task.annotations.zone\n"
                                      "score sum(t.requests.gpu for t in node.tasks)\n"
                                      "filter task.job.queue.name == 'q'\n"})
    assert ("Node", "metadata", "labels") in ps.reads["node"]
    assert ("Tasks", "*", "Resreq", "ScalarResources") in ps.reads["node"]
    assert ("Pod", "metadata", "annotations") in ps.reads["task"]
    assert ("Queue",) in ps.reads["job"] and ("Name",) in ps.reads["queue"]
    # only what the rules read: the decoders add wire.paths.ALWAYS_READ, which is not required
    assert ("UID",) not in ps.reads["task"] and ("Resreq",) not in ps.reads["task"]


def test_a_set_with_any_error_is_refused_whole_with_every_diagnostic():
    with pytest.raises(PolicyError) as caught:
        compile_sources({"a.policy": "filter true\n", "b.policy": "filter nod.x\n", "c.policy": "score (\n"})
    codes = [(d.span.file, d.code) for d in caught.value.diagnostics]
    assert codes == [("b.policy", "E202"), ("c.policy", "E101")]
    assert caught.value.to_dicts()[0]["line"] == 1


def _configmap_dir(root: Path, files: dict) -> Path:
    """The layout kubelet gives a ConfigMap volume: ..data -> ..<timestamp>/, files as symlinks."""
    stamp = root / "..2024_01_01_00_00_00.000000001"
    stamp.mkdir()
    for name, text in files.items():
        (stamp / name).write_text(text)
    os.symlink(stamp.name, root / "..data")
    for name in files:
        os.symlink(f"..data/{name}", root / name)
    return root


def test_load_directories_reads_a_configmap_volume(tmp_path):
    root = _configmap_dir(tmp_path, {"b.policy": "filter b: true\n", "a.policy": "filter a: true\n",
                                     "README.md": "not a policy"})
    (tmp_path / ".hidden.policy").write_text("this is not parsed")
    ps = load_directories([root])
    assert sorted(ps.sources) == ["a.policy", "b.policy"]
    assert [r.name for r in ps.rules] == ["a", "b"]


def test_load_directories_refuses_the_same_file_name_twice(tmp_path):
    for d in ("one", "two"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "x.policy").write_text("filter true\n")
    with pytest.raises(PolicyError, match="E407"):
        load_directories([tmp_path / "one", tmp_path / "two"])


def test_neutral_answers_without_rules():
    ps = compile_sources({"empty.policy": "# nothing yet\n"})
    assert ps.predicate(None, None, NO_SESSION).fits
    assert ps.prioritize(None, [], NO_SESSION).scores == {}
    assert ps.victims("reclaimable", None, [], NO_SESSION).status == 0
    assert ps.enqueueable(None, NO_SESSION).status == 0
    assert ps.overused(None, NO_SESSION).value is False
    assert ps.ready(None, NO_SESSION).value is True


@pytest.mark.parametrize("expr,code", [
    ("sum(1 for x in split(task.name * 1 + '', ''))", None),
    ("len(join(split(task.name, ''), 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx')) > 0", "E511"),
    ("9000000000000000000 * 9000000000000000000 > 0", "E510"),
])
def test_run_time_bounds_raise_eval_error_with_the_rule(expr, code):
    try:
        ps = compile_sources({"b.policy": f"filter bounded: {expr}\n"})
    except PolicyError:
        assert code is None  # refused at load time: fine too
        return
    body = b'{"task": {"UID": "t", "Job": "", "NodeName": "", "Name": "' + b"n" * 2000 + b'"}, "node": {"Name": "n"}}'
    request = decode.decode_predicate(body, ps.reads, NO_SESSION)
    with pytest.raises(EvalError) as caught:
        ps.predicate(request.task, request.node, NO_SESSION)
    assert caught.value.code == code and caught.value.rule == "bounded"
    assert str(caught.value).startswith("b.policy:1:")


def test_aggregates_refuse_too_many_elements():
    ps = compile_sources({"b.policy": "filter big: count(x for x in node.tasks) >= 0\n"})
    tasks = ",".join(f'"t{i}": {{"UID": "t{i}"}}' for i in range(100_001))
    body = ('{"task": {"UID": "t", "Job": "", "NodeName": ""}, "node": {"Name": "n", "Tasks": {' + tasks + "}}}").encode()
    request = decode.decode_predicate(body, ps.reads, NO_SESSION)
    with pytest.raises(EvalError, match="E512"):
        ps.predicate(request.task, request.node, NO_SESSION)


def test_resource_amounts_read_alone_score_as_the_whole_resources_do():
    """``node.idle.gpu`` compiles to one amount read off the wire (``View.amount``); a root that is
    not a view (no ``amount``) is read through its field, with the same result."""
    from types import SimpleNamespace

    from policy_extender.wire.resources import Resources
    ps = compile_sources({"r.policy": "score a: 1000000 * node.idle.gpu + 1000 * task.requests.cpu"
                                      " + node.allocatable.pods - node.used.memory\n"})
    request = decode.decode_prioritize(_sample("prioritize"), ps.reads, NO_SESSION)
    expected = {n.name: float(1000000 * n.idle.gpu + 1000 * request.task.requests.cpu + n.allocatable.pods - n.used.memory)
                for n in request.nodes}
    assert ps.prioritize(request.task, request.nodes, NO_SESSION).scores == expected
    assert any(v != 0 for v in expected.values())
    task = SimpleNamespace(requests=Resources({"cpu": 2}), job=None, name="t")
    node = SimpleNamespace(name="n", idle=Resources({"nvidia.com/gpu": 3}), allocatable=Resources({"pods": 7}),
                           used=Resources({"memory": 5}))
    assert ps.prioritize(task, [node], NO_SESSION).scores == {"n": 3002002.0}


def test_a_constant_reason_rejects_with_one_decision_and_answer_built_once():
    """A filter rule whose reason has no {expression} rejects with the same decision object on
    every call, and the predicate handler answers with the same Reply: both equal to what the
    per-call path builds. A reason with an {expression} is rendered per call."""
    import json

    from policy_extender.decide.decisions import FilterDecision
    from policy_extender.decide.handlers import decide_predicate
    from policy_extender.decide.reply import Reply
    from policy_extender.wire import encode

    ps = compile_sources({"p.policy": 'filter fixed: node.name == "nope"\n  reason "not the right node"\n  unresolvable\n'
                                      'filter shown: node.name == "nope"\n  reason "node {node.name} is not nope"\n'})
    assert set(ps.rejections) == {"fixed"}
    body = _sample("predicate")
    requests = [decode.decode_predicate(body, ps.reads, NO_SESSION) for _ in range(2)]
    first, second = (ps.predicate(r.task, r.node, NO_SESSION) for r in requests)
    assert first is second is ps.rejections["fixed"][0]
    assert first == FilterDecision(False, 3, "fixed (p.policy:1): not the right node", "fixed")
    assert ps.rejections["fixed"][1] == Reply(encode.predicate(first), decision="reject", rule="fixed")
    assert json.loads(ps.rejections["fixed"][1].body) == {"status": first.reason, "code": 3}

    class Service:  # what decide_predicate reads of the service, without a session
        decided_with = (ps, NO_SESSION)
        tally = type("Tally", (), {"record_predicate": staticmethod(lambda *a, **k: None)})()

        class session_cache:
            @staticmethod
            def env():
                return NO_SESSION
    assert decide_predicate(Service, body) is ps.rejections["fixed"][1]

    shown = compile_sources({"p.policy": 'filter shown: node.name == "nope"\n  reason "node {node.name} is not nope"\n'})
    assert shown.rejections == {}
    decision = shown.predicate(requests[0].task, requests[0].node, NO_SESSION)
    assert decision.reason == f"shown (p.policy:1): node {requests[0].node.name} is not nope" and decision.code == 2
