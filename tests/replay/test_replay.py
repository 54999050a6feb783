"""Replay and diff: the same policies change nothing, a zone filter flips exactly the nodes of
other zones, a broken candidate is an error (exit 2), --against compares two policy sets."""

from __future__ import annotations

import json

from tests.support.policies import write_policies
from tests.support.recorded import NODE_ZONES, RECORDED, ZONE_ADDED

OTHER_ZONES = sorted(node for node, zone in NODE_ZONES.items() if zone != "zone-a")


def test_same_policies_change_nothing(record, replay, tmp_path):
    recording = record(cycles=2)
    status, out, _ = replay(recording, "--policies", write_policies(tmp_path / "same", RECORDED))
    assert status == 0
    assert out.strip() == ("no changes against the recorded answers: 2 cycles, 32 calls, "
                           "24 decisions replayed")


def test_zone_filter_flips_exactly_the_nodes_in_other_zones(record, replay, tmp_path):
    recording = record()
    status, out, _ = replay(recording, "--policies", write_policies(tmp_path / "zone", ZONE_ADDED),
                            "--json")
    report = json.loads(out)
    assert status == 1
    flips = [(c["verb"], c["subject"], c["node"], c["kind"], c["before"], c["rule"])
             for c in report["changes"] if c["kind"] != "top node" and c["kind"] != "score"]
    assert flips == [("predicate", "ml/job-002-worker-0", node, "now unfit", "fits", "zone-a-only")
                     for node in OTHER_ZONES]
    assert all("only zone-a" in c["after"] and "code 2" in c["after"]
               for c in report["changes"] if c["kind"] == "now unfit")
    assert report["summary"]["by_kind"]["now unfit"] == len(OTHER_ZONES)


def test_the_table_names_node_rule_and_summary(record, replay, tmp_path):
    recording = record()
    status, out, _ = replay(recording, "--policies", write_policies(tmp_path / "zone", ZONE_ADDED))
    lines = out.splitlines()
    assert status == 1
    assert lines[0].split() == ["cycle#call", "verb", "task/job/queue", "node", "change", "before",
                                "after", "rule"]
    flipped = [line for line in lines[1:-1] if "now unfit" in line]
    assert [line.split()[3] for line in flipped] == OTHER_ZONES
    assert all(line.rstrip().endswith("zone-a-only") for line in flipped)
    assert lines[-1].startswith("3 changes (3 now unfit) against the recorded answers: 1 cycles")


def test_removing_a_filter_makes_rejected_nodes_fit_naming_the_old_rule(record, replay, tmp_path):
    recording = record(ZONE_ADDED)
    status, out, _ = replay(recording, "--policies", write_policies(tmp_path / "plain", RECORDED),
                            "--json")
    changes = json.loads(out)["changes"]
    assert status == 1
    assert [(c["node"], c["kind"], c["after"], c["rule"]) for c in changes] == \
        [(node, "now fits", "fits", "zone-a-only") for node in OTHER_ZONES]


def test_score_moves_and_top_node_with_a_threshold(record, replay, tmp_path):
    recording = record()
    doubled = {"cycle.policy": RECORDED["cycle.policy"].replace("10 * free_gpu", "20 * free_gpu")}
    candidate = write_policies(tmp_path / "doubled", doubled)
    status, out, _ = replay(recording, "--policies", candidate, "--json")
    scores = {c["node"]: (float(c["before"]), float(c["after"]))
              for c in json.loads(out)["changes"] if c["kind"] == "score"}
    assert status == 1
    assert scores and all(after == 2 * before and after - before >= 10
                          for before, after in scores.values())
    assert not [c for c in json.loads(out)["changes"] if c["kind"] == "top node"]
    status, out, _ = replay(recording, "--policies", candidate, "--score-threshold", "1000")
    assert status == 0


def test_against_compares_two_policy_sets_not_the_recording(record, replay, tmp_path):
    recording = record(ZONE_ADDED)
    zone = write_policies(tmp_path / "zone", ZONE_ADDED)
    status, out, _ = replay(recording, "--policies", zone, "--against", zone)
    assert status == 0 and out.startswith("no changes against policies in")
    plain = write_policies(tmp_path / "plain", RECORDED)
    status, out, _ = replay(recording, "--policies", zone, "--against", plain, "--json")
    report = json.loads(out)
    assert status == 1
    assert [c["node"] for c in report["changes"] if c["kind"] == "now unfit"] == OTHER_ZONES


def test_victim_and_status_changes(record, replay, tmp_path):
    recording = record()
    stricter = {"cycle.policy": RECORDED["cycle.policy"]
                .replace("job.min_available <= 3", "job.min_available <= 0")
                .replace("evictee.priority < evictor.priority", "false")}
    status, out, _ = replay(recording, "--policies", write_policies(tmp_path / "s", stricter), "--json")
    kinds = {(c["verb"], c["kind"]) for c in json.loads(out)["changes"]}
    assert status == 1
    assert ("jobEnqueueable", "enqueue") in kinds
    assert kinds >= {("preemptable", "victims")} or kinds >= {("preemptable", "status")}


def test_broken_candidate_is_a_clear_error_with_diagnostics(record, replay, tmp_path):
    recording = record()
    broken = write_policies(tmp_path / "broken", {"bad.policy": "filter oops: node.nope == 1\n"})
    status, out, err = replay(recording, "--policies", broken)
    assert status == 2 and out == ""
    assert f"the candidate policies in {broken} do not compile" in err
    assert "bad.policy:1:" in err and "^" in err


def test_missing_recording_or_empty_recording_is_exit_2(replay, tmp_path):
    policies = write_policies(tmp_path / "p", RECORDED)
    status, _, err = replay(tmp_path / "nowhere", "--policies", policies)
    assert status == 2 and "no such recording directory" in err
    (tmp_path / "empty").mkdir()
    status, _, err = replay(tmp_path / "empty", "--policies", policies)
    assert status == 2 and "no replayable cycle" in err
