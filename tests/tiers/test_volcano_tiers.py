"""Volcano's tier combination (a model of session_plugins.go) over the shipped scheduler conf,
with the extender's answers computed by the real policy engine from real request bodies.

What it shows: with the extender placed where the shipped conf puts it (last plugin of the tier
that holds priority and conformance), the bundled protection policy keeps a protected pod that
priority and conformance both propose; placed elsewhere (tier 2, as shipped before, or first in
tier 1) it does not. And what that placement changes for every other verb.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

import pytest
import yaml

from policy_extender.fixture_runner.exchange import Exchanger
from policy_extender.policyset import compile_sources

from . import volcano_model as volcano

ROOT = Path(__file__).resolve().parents[2]
CONFS = {mode: ROOT / "docker" / "k8s" / mode / "volcano-scheduler.conf" for mode in ("sidecar", "standalone")}
SAMPLES = ROOT / "tests" / "samples"
PROTECTED = "scheduling.example.com/protected"


def shipped(mode: str = "sidecar") -> dict:
    return yaml.safe_load(CONFS[mode].read_text())


def unfinal(conf: dict) -> dict:
    """``conf`` as it was before ``volcano-conf --final-victims`` (the shipped confs have it):
    every plugin's victim functions on again, but gang's and drf's preemptable (Volcano's default
    conf switches those off itself). What the placement alone does is shown on this one."""
    conf = copy.deepcopy(conf)
    for tier in conf["tiers"]:
        for plugin in tier["plugins"]:
            plugin.pop("enableReclaimable", None)
            if plugin["name"] not in ("gang", "drf"):
                plugin.pop("enablePreemptable", None)
    return conf


def bundled_policies():
    """The policy set the shipped ConfigMap mounts (docker/k8s/policies/configmap.yaml, made from policies/)."""
    configmap = yaml.safe_load((ROOT / "docker" / "k8s" / "policies" / "configmap.yaml").read_text())
    return compile_sources(configmap["data"])


# --- real bodies and the extender's real answers ---------------------------------------------

def victims_body(evictees: dict[str, bool]) -> bytes:
    """A preemptable/reclaimable body shaped like Volcano's (the captured sample), with one
    evictee per name, lower priority than the evictor; True marks it protected."""
    sample = json.loads((SAMPLES / "preemptable.json").read_text())
    template = sample["evictees"][0]
    out = []
    for name, protected in evictees.items():
        task = copy.deepcopy(template)
        task["UID"], task["Name"] = f"uid-{name}", name
        assert task["Priority"] < sample["evictor"]["Priority"]
        if protected:
            task["Pod"]["metadata"]["annotations"][PROTECTED] = "true"
        out.append(task)
    return json.dumps({"evictor": sample["evictor"], "evictees": out}).encode()


@functools.lru_cache(maxsize=None)
def service(with_session: bool) -> Exchanger:
    """The service in process (its real verb handlers, a real SQLite session store) on the
    bundled policies; with_session: the captured onSessionOpen snapshot is open."""
    exchanger = Exchanger(bundled_policies())
    if with_session:
        exchanger.open_session((SAMPLES / "onSessionOpen.json").read_bytes())
    return exchanger


def extender_victims(verb: str, body: bytes) -> tuple[list[str], int]:
    """The service's answer to a preemptable/reclaimable body: (victim names, status)."""
    answer = service(False).call(verb, body)
    return [v["Name"] for v in answer["victims"]], answer["status"]


def extender_enqueue(priority: int, gpus: int) -> int:
    """The service's jobEnqueueable status for the captured job (queue "restricted", Open in
    the captured snapshot), with this priority and GPU request."""
    sample = json.loads((SAMPLES / "jobEnqueueable.json").read_text())
    sample["job"]["Priority"] = priority
    sample["job"]["TotalRequest"]["ScalarResources"]["nvidia.com/gpu"] = gpus * 1000
    return service(True).call("jobEnqueueable", json.dumps(sample).encode())["status"]


def answers(tiers: list[list[str]], given: dict) -> list[list[tuple]]:
    """Tiers of plugin answers: each registered plugin's answer from ``given``."""
    return [[(p, *given[p]) if isinstance(given[p], tuple) else (p, given[p]) for p in tier] for tier in tiers]


# --- the model follows session_plugins.go ---------------------------------------------------

def test_model_evictable_follows_the_go_loop():
    P, A, R = volcano.PERMIT, volcano.ABSTAIN, volcano.REJECT
    # an abstention is skipped; lists intersect; the first tier with victims decides
    assert volcano.evictable([[("a", ["x", "y"], P), ("b", [], A), ("c", ["y", "z"], P)], [("d", ["x"], P)]]) == ["y"]
    # an empty Permit ends the tier with no victims, whatever came before; the next tier decides
    assert volcano.evictable([[("a", ["x"], P), ("b", [], P), ("c", ["x"], P)], [("d", ["z"], P)]]) == ["z"]
    # an empty intersection is nil: the next plugin of the tier starts over with its own list
    assert volcano.evictable([[("a", ["x"], P), ("b", ["y"], P), ("c", ["y", "z"], P)]]) == ["y", "z"]
    # a Reject that carries victims counts like a Permit (only status 0 is skipped)
    assert volcano.evictable([[("a", ["x", "y"], P), ("b", ["x"], R)]]) == ["x"]
    # nobody in any tier: no victims
    assert volcano.evictable([[("a", [], A)], []]) is None


def test_model_enqueue_permit_skips_only_later_tiers():
    P, A, R = volcano.PERMIT, volcano.ABSTAIN, volcano.REJECT
    assert volcano.enqueueable([[("ext", P)], [("proportion", R)]]) is True
    assert volcano.asked_for_enqueue([[("ext", P)], [("overcommit", R), ("proportion", R)]]) == ["ext"]
    assert volcano.enqueueable([[("ext", P), ("other", R)]]) is False      # same tier: asked, Reject wins
    assert volcano.enqueueable([[("ext", A)], [("proportion", R)]]) is False
    assert volcano.enqueueable([[("ext", A)], [("proportion", A)]]) is True


# --- the shipped placement ------------------------------------------------------------------

@pytest.mark.parametrize("mode", CONFS)
@pytest.mark.parametrize("verb, peers", [("preemptable", {"priority", "conformance"}),
                                         ("reclaimable", {"gang", "conformance"})])
def test_extender_is_the_last_victim_plugin_of_the_tier_it_must_narrow(mode, verb, peers):
    tiers = volcano.registered(unfinal(shipped(mode)), verb)
    (tier,) = [t for t in tiers if "extender" in t]
    assert peers <= set(tier), f"{verb}: the extender shares no tier with {peers}: {tiers}"
    assert tier[-1] == "extender", f"{verb}: a plugin after the extender can undo its narrowing: {tier}"


@pytest.mark.parametrize("mode", CONFS)
@pytest.mark.parametrize("verb", ["preemptable", "reclaimable"])
def test_with_final_victims_the_extender_is_the_only_victim_plugin(mode, verb):
    """The shipped confs switch every other victim function off (volcano-conf --final-victims)."""
    assert [p for tier in volcano.registered(shipped(mode), verb) for p in tier] == ["extender"]


def placed(conf: dict, where: str) -> dict:
    """The conf with the extender moved: "tier2-last" (as shipped before) or "tier1-first"."""
    conf = copy.deepcopy(conf)
    extender = next(p for t in conf["tiers"] for p in t["plugins"] if p["name"] == "extender")
    for tier in conf["tiers"]:
        tier["plugins"] = [p for p in tier["plugins"] if p["name"] != "extender"]
    if where == "tier2-last":
        conf["tiers"][1]["plugins"].append(extender)
    else:
        conf["tiers"][0]["plugins"].insert(0, extender)
    return conf


def preempt(conf: dict, evictees: dict[str, bool]) -> list[str] | None:
    """Session.Preemptable under ``conf``: priority and conformance propose every evictee (all
    are lower priority than the preemptor and none is critical), the extender answers with the
    bundled policies."""
    extender = extender_victims("preemptable", victims_body(evictees))
    everyone = (list(evictees), volcano.PERMIT)
    given = {"priority": everyone, "conformance": everyone, "gang": everyone, "drf": everyone,
             "extender": extender}
    return volcano.evictable(answers(volcano.registered(conf, "preemptable"), given))


@pytest.mark.parametrize("mode", CONFS)
def test_shipped_conf_keeps_a_protected_pod_that_priority_and_conformance_propose(mode):
    conf = shipped(mode)
    assert extender_victims("preemptable", victims_body({"low": False, "guarded": True})) == (["low"], 1)
    assert preempt(conf, {"low": False, "guarded": True}) == ["low"]
    # only protected pods on the node: the extender's empty Permit ends tier 1; no later tier
    # registers a preemptable function (drf has enablePreemptable: false), so nothing is evicted
    assert extender_victims("preemptable", victims_body({"guarded": True})) == ([], 1)
    assert preempt(conf, {"guarded": True}) is None


def test_in_tier_two_the_same_policy_is_never_asked_and_the_protected_pod_is_evicted():
    """As shipped before: tier 1 (priority, conformance) found victims, so tier 2 is not asked."""
    assert preempt(placed(unfinal(shipped()), "tier2-last"), {"low": False, "guarded": True}) == ["low", "guarded"]


def test_first_in_its_tier_a_narrowing_that_empties_the_intersection_is_undone():
    """The extender keeps [low]; priority proposes only [guarded] (low's job has the preemptor's
    priority), conformance proposes both. First in the tier, extender ∩ priority is empty, so
    conformance's list starts over and guarded is evicted; last in the tier, the empty
    intersection ends the tier with no victims and no later tier registers preemptable."""
    extender = extender_victims("preemptable", victims_body({"low": False, "guarded": True}))
    given = {"extender": extender, "priority": (["guarded"], volcano.PERMIT),
             "conformance": (["low", "guarded"], volcano.PERMIT)}
    first = placed(unfinal(shipped()), "tier1-first")
    assert volcano.evictable(answers(volcano.registered(first, "preemptable"), given)) == ["low", "guarded"]
    assert volcano.evictable(answers(volcano.registered(unfinal(shipped()), "preemptable"), given)) is None
    # with final victims (shipped), the extender's own list stands
    assert volcano.evictable(answers(volcano.registered(shipped(), "preemptable"), given)) == ["low"]


def test_reclaim_tier_two_decides_alone_when_tier_one_finds_nothing():
    """The limit without --final-victims: in reclaim, proportion (tier 2) is asked when tier 1
    (gang, conformance, extender) gives no victims, and the extender is not in tier 2. The shipped
    confs switch proportion's reclaim function off, and the protected pod stays."""
    shipped_tiers = volcano.registered(shipped(), "reclaimable")
    assert shipped_tiers == [["extender"], []]
    alone = volcano.evictable(answers(shipped_tiers, {"extender": extender_victims("reclaimable", victims_body({"guarded": True}))}))
    assert alone is None
    conf = unfinal(shipped())
    assert volcano.registered(conf, "reclaimable") == [["gang", "conformance", "extender"], ["proportion"]]
    extender = extender_victims("reclaimable", victims_body({"guarded": True}))
    assert extender == ([], 1)
    everyone = (["guarded"], volcano.PERMIT)
    given = {"gang": everyone, "conformance": everyone, "extender": extender, "proportion": everyone}
    assert volcano.evictable(answers(volcano.registered(conf, "reclaimable"), given)) == ["guarded"]
    # with an unprotected pod beside it, tier 1 decides and the protected pod stays
    extender = extender_victims("reclaimable", victims_body({"low": False, "guarded": True}))
    everyone = (["low", "guarded"], volcano.PERMIT)
    given = {"gang": everyone, "conformance": everyone, "extender": extender, "proportion": everyone}
    assert volcano.evictable(answers(volcano.registered(conf, "reclaimable"), given)) == ["low"]


def test_enqueue_a_permit_from_the_extender_skips_overcommit_and_proportion():
    conf = shipped()
    tiers = volcano.registered(conf, "jobEnqueueable")
    assert tiers == [["extender"], ["overcommit", "proportion"]]
    vip, small, big = extender_enqueue(1000, 4), extender_enqueue(10, 4), extender_enqueue(1000, 32)
    assert (vip, small, big) == (volcano.PERMIT, volcano.ABSTAIN, volcano.REJECT)
    full = volcano.REJECT  # overcommit and proportion would both keep the job pending
    for status, asked, result in [(vip, ["extender"], True),
                                  (small, ["extender", "overcommit"], False),
                                  (big, ["extender"], False)]:
        tier_answers = answers(tiers, {"extender": status, "overcommit": full, "proportion": full})
        assert volcano.asked_for_enqueue(tier_answers) == asked
        assert volcano.enqueueable(tier_answers) is result


def test_order_free_verbs_do_not_depend_on_the_placement():
    conf = shipped()
    tiers = volcano.registered(conf, "queueOverused")
    assert tiers == [["extender"], ["proportion"]]
    for placement in (tiers, volcano.registered(placed(conf, "tier2-last"), "queueOverused")):
        assert volcano.overused(answers(placement, {"extender": True, "proportion": False})) is True
        assert volcano.overused(answers(placement, {"extender": False, "proportion": True})) is True
    # predicate: every plugin must pass wherever the extender is; only the order changes: in
    # tier 1 the extender is asked before the predicates plugin of tier 2
    assert volcano.predicate_order(volcano.registered(conf, "predicate")) == ["extender", "predicates"]
    assert volcano.predicate([[("extender", None)], [("predicates", None)]]) is None
    assert volcano.predicate([[("extender", "zone")], [("predicates", "taint")]]) == "zone"


@pytest.mark.parametrize("mode", CONFS)
def test_jobready_is_left_unregistered_in_the_shipped_conf(mode):
    """With ignorable: true a failed jobReady call answers false (extender.go:
    ``return !ep.config.ignorable``), so an unreachable service would stop every commit of the
    allocate action; gang's own JobReady already decides what the bundled ready rule says."""
    conf = shipped(mode)
    assert volcano.registered(conf, "jobReady") == [["gang"], []]
    (extender,) = [p for t in conf["tiers"] for p in t["plugins"] if p["name"] == "extender"]
    assert extender["arguments"]["extender.ignorable"] is True


def test_when_the_plugins_before_it_agree_on_nothing_the_extender_decides_alone():
    """The documented limit of the intersection: priority ∩ conformance empty is nil, so the
    extender's own list becomes the tier's answer, including a pod priority refused."""
    extender = extender_victims("preemptable", victims_body({"low": False, "guarded": True}))
    assert extender == (["low"], volcano.PERMIT)
    given = {"priority": (["guarded"], volcano.PERMIT), "conformance": (["low"], volcano.PERMIT),
             "extender": extender}
    assert volcano.evictable(answers(volcano.registered(shipped(), "preemptable"), given)) == ["low"]
