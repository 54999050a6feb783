"""The kube-scheduler routes' options: ``kube_scheduler_prefix`` and ``kube_scheduler_verbs``."""

from __future__ import annotations

import pytest

from policy_extender.config import MIB, ConfigError, load
from policy_extender.verb_names.kube_scheduler import FILTER, PREEMPT, PRIORITIZE
from policy_extender.verb_names.volcano import PRIORITIZE as VOLCANO_PRIORITIZE


def test_the_default_paths_are_under_kube_scheduler_beside_volcanos():
    cfg = load({}, {})
    assert cfg.kube_scheduler_paths() == {"/kube-scheduler/filter": FILTER,
                                          "/kube-scheduler/prioritize": PRIORITIZE,
                                          "/kube-scheduler/preempt": PREEMPT}
    assert cfg.verb_paths()["/prioritize"] == VOLCANO_PRIORITIZE  # Volcano's own, unchanged
    assert not set(cfg.verb_paths()) & set(cfg.kube_scheduler_paths())


def test_an_empty_prefix_serves_no_kube_scheduler_verbs(tmp_path):
    assert load({}, {"POLICY_EXTENDER_KUBE_SCHEDULER_PREFIX": ""}).kube_scheduler_paths() == {}
    path = tmp_path / "c.yaml"
    path.write_text('kube_scheduler_prefix: ""\n')
    assert load({}, {}, str(path)).kube_scheduler_paths() == {}


@pytest.mark.parametrize("prefix, path", [("ks", "/ks/filter"), ("/a/b/", "/a/b/filter"), ("/sched", "/sched/filter")])
def test_the_prefix_is_normalised_to_one_leading_slash(prefix, path):
    assert load({"kube_scheduler_prefix": prefix}, {}).kube_scheduler_paths()[path] == FILTER


def test_verbs_are_renamed_by_their_kube_scheduler_config_names(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("kube_scheduler_verbs:\n  filter: policyFilter\n")
    cfg = load({}, {}, str(path))
    assert cfg.kube_scheduler_paths() == {"/kube-scheduler/policyFilter": FILTER,
                                          "/kube-scheduler/prioritize": PRIORITIZE,
                                          "/kube-scheduler/preempt": PREEMPT}
    assert cfg.kube_scheduler_verb(FILTER) == "policyFilter"
    env = load({}, {"POLICY_EXTENDER_KUBE_SCHEDULER_VERBS": "preempt=p"})
    assert env.kube_scheduler_paths()["/kube-scheduler/p"] == PREEMPT


def test_path_prefix_is_volcanos_only():
    cfg = load({"path_prefix": "/extender"}, {})
    assert "/extender/predicate" in cfg.verb_paths()
    assert "/kube-scheduler/filter" in cfg.kube_scheduler_paths()


def test_kube_scheduler_verbs_have_their_own_body_limits():
    cfg = load({"body_limits": "kube-scheduler.filter=64MiB"}, {})
    assert cfg.body_limit_for(FILTER) == 64 * MIB
    assert cfg.body_limit_for(PRIORITIZE) == 256 * MIB  # the default: 5,000 whole v1.Nodes fit
    assert cfg.body_limit_for("predicate") == 16 * MIB


@pytest.mark.parametrize("flags, message", [
    ({"kube_scheduler_verbs": "predicate=x"},
     "flag --kube-scheduler-verbs: unknown kube-scheduler verb 'predicate'; the kube-scheduler verbs are filter, prioritize, preempt"),
    ({"kube_scheduler_verbs": "filter=a/b"}, "verb path for filter must be one URL segment"),
    ({"kube_scheduler_prefix": "/"}, "would put kube-scheduler's verbs at the root"),
    ({"kube_scheduler_prefix": "/a b/"}, "expected a URL path such as /kube-scheduler/"),
    ({"kube_scheduler_prefix": "/../x"}, "expected a URL path such as /kube-scheduler/"),
    ({"verbs": "filter=x"}, "unknown verb kind 'filter'"),  # Volcano's verbs stay Volcano's
])
def test_bad_values_say_where_and_what(flags, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(".", r"\.")):
        load(flags, {})


def test_a_kube_scheduler_path_that_a_volcano_verb_answers_is_refused():
    with pytest.raises(ConfigError, match="puts kube-scheduler's prioritize verb at /extender/prioritize, "
                                          "which Volcano's prioritize verb already answers"):
        load({"path_prefix": "/extender", "kube_scheduler_prefix": "/extender"}, {})
    # renamed apart, the same prefix is fine
    cfg = load({"path_prefix": "/extender", "kube_scheduler_prefix": "/extender",
                "kube_scheduler_verbs": "prioritize=kubePrioritize"}, {})
    assert cfg.kube_scheduler_paths()["/extender/kubePrioritize"] == PRIORITIZE
