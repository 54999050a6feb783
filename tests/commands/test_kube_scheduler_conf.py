"""``policy-extender kube-scheduler-conf``: the extenders: entry kube-scheduler loads, derived from
the policy set and the serve config, and merged into the user's KubeSchedulerConfiguration.

The strict check below is this test's own transcription of v1 ``Extender`` (the same in
k8s.io/kube-scheduler v0.30.2 and v0.35.3, config/v1/types.go) and of kube-scheduler's
``validateExtenders`` (pkg/scheduler/apis/config/validation), independent of the module's.
tests/samples/kube-scheduler/scheduler-config.yaml is the command's output for the sample policy
set and base config; the Go harness (e2e) loads it with kube-scheduler's own decoder.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from policy_extender.commands import kube_scheduler_conf as ksc
from policy_extender.config import load
from policy_extender.verb_names.kube_scheduler import FILTER, PREEMPT, PRIORITIZE

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "tests" / "samples" / "kube-scheduler"

#: v1 Extender: json tag -> Python type of the decoded YAML value (Go: string, int64, bool,
#: metav1.Duration (a string time.ParseDuration reads), *ExtenderTLSConfig, []ExtenderManagedResource)
V1_EXTENDER = {"urlPrefix": str, "filterVerb": str, "preemptVerb": str, "prioritizeVerb": str, "weight": int,
               "bindVerb": str, "enableHTTPS": bool, "tlsConfig": dict, "httpTimeout": str,
               "nodeCacheCapable": bool, "managedResources": list, "ignorable": bool}
V1_TLS = {"insecure": bool, "serverName": str, "certFile": str, "keyFile": str, "caFile": str, "certData": str,
          "keyData": str, "caData": str}
V1_MANAGED_RESOURCE = {"name": str, "ignoredByScheduler": bool}
GO_DURATION = re.compile(r"(\d+(\.\d*)?(ns|us|µs|ms|s|m|h))+")


def strictly_loaded(text: str) -> list[dict]:
    """The extenders of a KubeSchedulerConfiguration, as kube-scheduler's strict decoding and
    validation would accept them; any other field, type or value fails the test."""
    config = yaml.safe_load(text)
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1" and config["kind"] == "KubeSchedulerConfiguration"
    extenders = config["extenders"]
    managed: list[str] = []
    for extender in extenders:
        assert set(extender) <= set(V1_EXTENDER), set(extender) - set(V1_EXTENDER)
        for key, value in extender.items():
            assert isinstance(value, V1_EXTENDER[key]) and not (V1_EXTENDER[key] is int and isinstance(value, bool)), key
        assert GO_DURATION.fullmatch(extender.get("httpTimeout", "0s"))
        assert set(extender.get("tlsConfig", {})) <= set(V1_TLS)
        for resource in extender.get("managedResources", []):
            assert set(resource) <= set(V1_MANAGED_RESOURCE) and isinstance(resource["name"], str)
            assert "/" in resource["name"] and "kubernetes.io/" not in resource["name"]
            managed.append(resource["name"])
        if extender.get("prioritizeVerb"):
            assert extender["weight"] >= 1  # "must have a positive weight applied to it"
    assert len(managed) == len(set(managed)), "duplicate extender managed resource name"
    return extenders


def policies(tmp_path: Path, *files: str) -> Path:
    directory = tmp_path / "policies"
    directory.mkdir(exist_ok=True)
    for number, text in enumerate(files):
        (directory / f"p{number}.policy").write_text(text)
    return directory


KUBE = "protocol volcano, kube-scheduler\n"
FILTER_RULE = "filter not-cordoned: not node.unschedulable\n"
SCORE_RULE = "score roomy: node.allocatable.cpu\n    normalize 0 to 10\n"
VICTIM_RULE = "victim protected: evictee.annotations[\"p\"] != \"true\"\n"


def entry_for(directory: Path, config=None, url=None, **options) -> dict:
    config = config or load({}, {})
    kinds = ksc.served_rule_kinds([directory])
    address, _ = ksc.url_prefix(config, url)
    return ksc.extender_entry(address, ksc.verbs_for(kinds, config), **options)


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin"}  # no POLICY_EXTENDER_* from the caller
    return subprocess.run([sys.executable, "-m", "policy_extender", "kube-scheduler-conf", *args], input=stdin,
                          capture_output=True, text=True, cwd=ROOT, timeout=60, env=env)


# ---------------------------------------------------------------------------------------------
# the entry


def test_every_verb_is_registered_when_the_set_serves_each_rule_kind(tmp_path):
    entry = entry_for(policies(tmp_path, KUBE + FILTER_RULE + SCORE_RULE + VICTIM_RULE))
    assert entry == {"urlPrefix": "http://127.0.0.1:8713/kube-scheduler", "filterVerb": "filter",
                     "prioritizeVerb": "prioritize", "preemptVerb": "preempt", "weight": 1, "enableHTTPS": False,
                     "httpTimeout": "5s", "nodeCacheCapable": False, "ignorable": True, "managedResources": []}
    assert list(entry) == ["urlPrefix", "filterVerb", "prioritizeVerb", "preemptVerb", "weight", "enableHTTPS",
                           "httpTimeout", "nodeCacheCapable", "ignorable", "managedResources"]
    (loaded,) = strictly_loaded(f"apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                                f"{ksc.render_entry(entry)}")
    assert loaded == entry


def test_a_set_without_kube_scheduler_score_rules_registers_no_prioritize_verb(tmp_path):
    # the score rule serves Volcano only (no protocol statement): kube-scheduler gets no prioritize
    directory = policies(tmp_path, KUBE + FILTER_RULE, SCORE_RULE)
    entry = entry_for(directory)
    assert "prioritizeVerb" not in entry and "weight" not in entry and "preemptVerb" not in entry
    assert entry["filterVerb"] == "filter"
    assert ksc._verb_notes(entry) == ["prioritizeVerb left out: the policy set serves kube-scheduler no score rule",
                                      "preemptVerb left out: the policy set serves kube-scheduler no victim or "
                                      "preemptable rule"]


def test_a_preemptable_rule_registers_preempt(tmp_path):
    entry = entry_for(policies(tmp_path, KUBE + "preemptable lower: evictee.priority < evictor.priority\n"))
    assert entry["preemptVerb"] == "preempt" and "filterVerb" not in entry


def test_a_set_serving_kube_scheduler_nothing_is_refused(tmp_path):
    with pytest.raises(ksc.KubeSchedulerConfError, match="serves kube-scheduler no rule.*protocol volcano, kube-scheduler"):
        entry_for(policies(tmp_path, FILTER_RULE + SCORE_RULE))


def test_a_set_that_does_not_load_is_refused_with_its_errors(tmp_path):
    with pytest.raises(ksc.KubeSchedulerConfError, match=r"does not load(.|\n)*p0.policy:2"):
        entry_for(policies(tmp_path, KUBE + "enqueue x: job.priority > 1\n"))  # E410


def test_verb_paths_and_prefix_come_from_the_serve_config(tmp_path):
    config = load({"kube_scheduler_prefix": "/sched/ext/", "kube_scheduler_verbs": "filter=policyFilter",
                   "bind": "10.1.2.3:9000"}, {})
    entry = entry_for(policies(tmp_path, KUBE + FILTER_RULE), config)
    assert entry["urlPrefix"] == "http://10.1.2.3:9000/sched/ext" and entry["filterVerb"] == "policyFilter"
    # kube-scheduler's URL is urlPrefix + "/" + verb: exactly the path serve answers
    assert f"/sched/ext/{entry['filterVerb']}" in config.kube_scheduler_paths()
    assert config.kube_scheduler_paths()["/sched/ext/policyFilter"] == FILTER


@pytest.mark.parametrize("url, expected", [
    ("http://policy-extender.kube-system.svc:8713", "http://policy-extender.kube-system.svc:8713/kube-scheduler"),
    ("http://pe:8713/", "http://pe:8713/kube-scheduler"),
    ("http://pe:8713/kube-scheduler/", "http://pe:8713/kube-scheduler"),
    ("https://gateway.example.com/pe", "https://gateway.example.com/pe/kube-scheduler"),
])
def test_url_gets_the_prefix_once(url, expected):
    assert ksc.url_prefix(load({}, {}), url)[0] == expected


def test_a_bind_kube_scheduler_cannot_dial_needs_url():
    for bind in ("0.0.0.0:8713", "[::]:8713", "unix:/run/pe.sock"):
        with pytest.raises(ksc.KubeSchedulerConfError, match="pass --url"):
            ksc.url_prefix(load({"bind": bind}, {}), None)


def test_tls_in_the_serve_config_means_https(tmp_path):
    config = load({}, {})
    object.__setattr__(config, "certfile", "cert.pem")
    assert ksc.url_prefix(config, None)[0] == "https://127.0.0.1:8713/kube-scheduler"
    with pytest.raises(ksc.KubeSchedulerConfError, match="speaks HTTPS only"):
        ksc.url_prefix(config, "http://pe:8713")
    entry = ksc.extender_entry("https://pe:8713/kube-scheduler", {FILTER: "filter"}, tls_ca_file="/etc/pe/ca.crt")
    assert entry["tlsConfig"] == {"caFile": "/etc/pe/ca.crt"} and entry["enableHTTPS"] is False
    strictly_loaded(f"apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                    f"{ksc.render_entry(entry)}")


def test_an_empty_prefix_serves_nothing_to_point_at():
    with pytest.raises(ksc.KubeSchedulerConfError, match="kube_scheduler_prefix is empty"):
        ksc.url_prefix(load({"kube_scheduler_prefix": ""}, {}), "http://pe:8713")


@pytest.mark.parametrize("options, message", [
    ({"weight": 0}, "positive weight"),
    ({"http_timeout": "5"}, "not a Go duration"),
    ({"http_timeout": "0s"}, "must be > 0"),
    ({"http_timeout": "-1s"}, "must be > 0"),
])
def test_values_kube_scheduler_would_refuse_are_refused(options, message):
    with pytest.raises(ksc.KubeSchedulerConfError, match=message):
        ksc.extender_entry("http://pe:8713/kube-scheduler", {PRIORITIZE: "prioritize"}, **options)


@pytest.mark.parametrize("text, ns", [("5s", 5 * 10**9), ("1m30s", 90 * 10**9), ("1.5s", 1_500_000_000),
                                      ("500ms", 500 * 10**6), ("0", 0), ("-2s", -2 * 10**9), ("5", None),
                                      ("s", None), ("5 s", None), ("1d", None), ("", None)])
def test_go_durations_parse_as_time_ParseDuration_does(text, ns):
    assert ksc.go_duration_ns(text) == ns


@pytest.mark.parametrize("name, ok", [("nvidia.com/gpu", True), ("example.com/fpga-x1", True), ("cpu", False),
                                      ("kubernetes.io/batteries", False), ("requests.example.com/x", False),
                                      ("Example.com/x", False), ("example.com/-x", False)])
def test_managed_resources_must_be_extended_resource_names(name, ok):
    entry = ksc.extender_entry("http://pe:8713/kube-scheduler", {FILTER: "filter"}, managed_resources=[name])
    assert entry["managedResources"] == [{"name": name, "ignoredByScheduler": False}]
    assert (ksc.check_extender(entry) == []) is ok


def test_the_check_refuses_unknown_fields_and_wrong_types():
    problems = ksc.check_extender({"urlPrefix": "http://x", "filterverb": "filter", "weight": "1",
                                   "prioritizeVerb": "p", "httpTimeout": "5", "nodeCacheCapable": True,
                                   "tlsConfig": {"ca": "x"}, "managedResources": [{"name": "a/b", "ignored": 1}]})
    text = "\n".join(problems)
    for expected in ("extender.filterverb: unknown field", "extender.weight: '1' is not an integer",
                     "must have a positive weight", "extender.httpTimeout: '5' is not a Go duration",
                     "nodeCacheCapable: true sends node names only", "extender.tlsConfig.ca: unknown field",
                     "extender.managedResources[0].ignored: unknown field"):
        assert expected in text, (expected, text)


# ---------------------------------------------------------------------------------------------
# --merge


BASE = (SAMPLES / "base-config.yaml").read_text()
ENTRY = ksc.extender_entry("http://pe:8713/kube-scheduler", {FILTER: "filter", PRIORITIZE: "prioritize",
                                                             PREEMPT: "preempt"})

WITH_EXTENDERS = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
extenders:
    # the GPU team's extender
    -   urlPrefix: http://gpu-extender:8888/
        filterVerb: filter
        managedResources:
            -   name: example.com/fpga
        ignorable: true   # best effort
profiles:
- schedulerName: default-scheduler
"""


def test_merge_appends_the_entry_and_keeps_every_other_byte():
    result = ksc.merge(BASE, ENTRY)
    assert result.notes == []
    config = yaml.safe_load(result.text)
    assert config["extenders"] == [ENTRY]
    assert {k: v for k, v in config.items() if k != "extenders"} == yaml.safe_load(BASE)
    kept = [line for line in result.text.splitlines(keepends=True) if not line.startswith(("extenders:", "- ", "  ", "# added"))
            or line in BASE.splitlines(keepends=True)]
    assert "".join(kept) == BASE  # comments included
    assert strictly_loaded(result.text) == [ENTRY]


def test_merge_into_existing_extenders_lays_the_item_out_like_its_neighbours():
    result = ksc.merge(WITH_EXTENDERS, ENTRY)
    config = yaml.safe_load(result.text)
    assert [e["urlPrefix"] for e in config["extenders"]] == ["http://gpu-extender:8888/", "http://pe:8713/kube-scheduler"]
    assert config["profiles"] == [{"schedulerName": "default-scheduler"}]
    assert "    -   urlPrefix: http://pe:8713/kube-scheduler\n" in result.text
    assert "# the GPU team's extender" in result.text and "# best effort" in result.text
    strictly_loaded(result.text)


def test_merge_refuses_an_extender_already_at_that_url():
    text = WITH_EXTENDERS.replace("http://gpu-extender:8888/", "http://pe:8713/kube-scheduler/")
    with pytest.raises(ksc.KubeSchedulerConfError) as error:
        ksc.merge(text, ENTRY, where="sched.yaml")
    assert str(error.value).startswith("sched.yaml:5:9: this config already has an extender at "
                                       "http://pe:8713/kube-scheduler")


def test_merge_refuses_a_resource_another_extender_manages():
    entry = ksc.extender_entry("http://pe:8713/kube-scheduler", {FILTER: "filter"}, managed_resources=["example.com/fpga"])
    with pytest.raises(ksc.KubeSchedulerConfError, match=r"extenders\[1\]\.managedResources\[0\]\.name: 'example.com/fpga': "
                                            "duplicate extender managed resource name"):
        ksc.merge(WITH_EXTENDERS, entry)


def test_a_flow_list_is_reserialised_with_a_note():
    result = ksc.merge("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                       "extenders: []  # none yet\n", ENTRY)
    assert yaml.safe_load(result.text)["extenders"] == [ENTRY]
    assert any("re-serialised" in note for note in result.notes)


@pytest.mark.parametrize("text, message", [
    ("apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n", "FILE:1:13: apiVersion"),
    ("apiVersion: v1\nkind: ConfigMap\ndata:\n  config.yaml: x\n", "a ConfigMap: give the KubeSchedulerConfiguration"),
    ("- a\n", "not a KubeSchedulerConfiguration"),
    ("apiVersion: [\n", "FILE:2:1: not valid YAML"),
    ("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nextenders: {a: 1}\n",
     "FILE:3:12: extenders: is not a list"),
])
def test_bad_configs_say_where_and_what(text, message):
    with pytest.raises(ksc.KubeSchedulerConfError, match=re.escape(message)):
        ksc.merge(text, ENTRY)


# ---------------------------------------------------------------------------------------------
# the command line and the sample the Go harness loads


@pytest.mark.slow
def test_the_sample_config_is_what_the_command_prints():
    done = cli(str(SAMPLES / "policies"), "--url", "http://127.0.0.1:8713", "--merge", str(SAMPLES / "base-config.yaml"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == (SAMPLES / "scheduler-config.yaml").read_text(), (
        "regenerate: policy-extender kube-scheduler-conf tests/samples/kube-scheduler/policies --url "
        "http://127.0.0.1:8713 --merge tests/samples/kube-scheduler/base-config.yaml "
        "> tests/samples/kube-scheduler/scheduler-config.yaml")
    (entry,) = strictly_loaded(done.stdout)
    assert entry["filterVerb"] and entry["prioritizeVerb"] and entry["preemptVerb"]


@pytest.mark.slow
def test_cli_prints_the_entry_with_notes_and_exits_2_on_errors(tmp_path):
    directory = policies(tmp_path, KUBE + FILTER_RULE)
    done = cli(str(directory), "--weight", "3", "--managed-resource", "nvidia.com/gpu")
    assert done.returncode == 0, done.stderr
    (entry,) = yaml.safe_load(done.stdout)["extenders"]
    assert entry["managedResources"] == [{"name": "nvidia.com/gpu", "ignoredByScheduler": False}]
    assert "note: prioritizeVerb left out" in done.stderr and "loopback" in done.stderr
    config = tmp_path / "serve.yaml"
    config.write_text(f"policy_dirs: [{directory}]\nbind: 0.0.0.0:8713\nkube_scheduler_verbs: {{filter: f}}\n")
    refused = cli("--config", str(config))
    assert refused.returncode == 2 and "pass --url" in refused.stderr and refused.stdout == ""
    done = cli("--config", str(config), "--url", "http://pe.svc:8713")
    assert done.returncode == 0 and yaml.safe_load(done.stdout)["extenders"][0]["filterVerb"] == "f"
    assert cli(str(directory), "--weight", "x").returncode == 2
    missing = cli(str(directory), "--merge", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr
    merged = cli(str(directory), "--merge", "-", stdin=BASE)
    assert merged.returncode == 0 and merged.stdout.startswith(BASE.split("# end")[0])


@pytest.mark.slow
def test_the_entry_reaches_the_routes_a_serve_with_that_config_answers(tmp_path):
    """kube-scheduler's URL is urlPrefix + "/" + verb (extender.go send): with the entry this command
    prints for a serve config (a renamed prefix and verb), each verb reaches that serve's route."""
    import http.client
    import os
    import signal
    from urllib.parse import urlsplit

    from tests.ops.test_image import free_port
    from tests.ops.test_serve import wait_ready

    port = free_port()
    config = tmp_path / "serve.yaml"
    config.write_text(f"bind: 127.0.0.1:{port}\nworkers: 1\nthreads: 2\npolicy_dirs: [{SAMPLES / 'policies'}]\n"
                      f"kube_scheduler_prefix: /sched/\nkube_scheduler_verbs: {{filter: policyFilter}}\n"
                      f"session_store: sqlite:{tmp_path / 'sessions.sqlite'}\nreload_interval: 0\n")
    done = cli("--config", str(config))
    assert done.returncode == 0, done.stderr
    (entry,) = strictly_loaded("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                               + done.stdout)
    assert entry["urlPrefix"] == f"http://127.0.0.1:{port}/sched" and entry["filterVerb"] == "policyFilter"
    stderr = tmp_path / "stderr"
    process = subprocess.Popen([sys.executable, "-m", "policy_extender", "serve", "--config", str(config)], cwd=ROOT,
                               env={**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)},
                               stdout=subprocess.DEVNULL, stderr=open(stderr, "wb"))
    try:
        wait_ready(port, process, stderr)
        base = urlsplit(entry["urlPrefix"])
        answers = {}
        for verb, sample in (("filterVerb", "filter"), ("prioritizeVerb", "prioritize"), ("preemptVerb", "preempt")):
            connection = http.client.HTTPConnection(base.hostname, base.port, timeout=30)
            connection.request("POST", base.path.rstrip("/") + "/" + entry[verb],
                               (ROOT / "samples" / "kube-scheduler" / f"{sample}.json").read_bytes(),
                               {"Content-Type": "application/json"})
            response = connection.getresponse()
            answers[sample] = (response.status, json.loads(response.read()))
            connection.close()
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
    assert answers["filter"][0] == 200 and answers["filter"][1]["Error"] == "", answers
    assert answers["prioritize"][0] == 200 and {e["Host"] for e in answers["prioritize"][1]} == {
        n["metadata"]["name"] for n in json.loads((ROOT / "samples/kube-scheduler/prioritize.json").read_text())["Nodes"]["items"]}
    assert answers["preempt"][0] == 200 and "NodeNameToMetaVictims" in answers["preempt"][1], answers
