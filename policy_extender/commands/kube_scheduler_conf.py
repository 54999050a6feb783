"""``policy-extender kube-scheduler-conf``: the ``extenders:`` entry of a KubeSchedulerConfiguration.

kube-scheduler reads its extenders from its own config file (``kube-scheduler --config FILE``,
``apiVersion: kubescheduler.config.k8s.io/v1``, ``kind: KubeSchedulerConfiguration``): one entry
per extender, the fields of v1 ``Extender`` (``k8s.io/kube-scheduler/config/v1/types.go``). This
command prints the entry for this service, derived from what it will serve:

- the verbs come from the policy set (the directories given, else the serve config's
  ``policy_dirs``): ``filterVerb`` only when some file serving kube-scheduler has a ``filter``
  rule, ``prioritizeVerb`` (and ``weight``) only with a ``score`` rule, ``preemptVerb`` only with
  a ``victim`` or ``preemptable`` rule, so kube-scheduler never calls a verb that would decide
  nothing; a set that serves kube-scheduler no rule at all is refused. The path of each verb is
  the serve config's (``kube_scheduler_verbs``);
- ``urlPrefix`` is ``--url`` (the service as kube-scheduler reaches it) followed by the serve
  config's ``kube_scheduler_prefix``, or, without ``--url``, the serve config's ``bind`` when it
  is an address kube-scheduler can dial (``https://`` when the config has a ``certfile``);
- ``nodeCacheCapable: false`` always (the service keeps no node cache: it needs whole nodes),
  ``enableHTTPS: false`` (kube-scheduler then verifies an ``https://`` URL's certificate against
  its host's roots, or ``tlsConfig.caFile`` with ``--tls-ca-file``; ``enableHTTPS: true`` without
  a CA would turn verification off).

Every value is checked as kube-scheduler would when it loads its config (its strict decoder and
``validateExtenders``): :func:`check_extender` holds the field names and types of v1
``Extender``, ``weight`` >= 1 with a prioritize verb, ``httpTimeout`` a Go duration, managed
resources extended resource names, none managed by two extenders.

``--merge FILE`` prints that KubeSchedulerConfiguration with the entry appended to its
``extenders:`` list, everything else kept byte for byte, comments included (the entry's lines are
spliced into the text, as ``volcano-conf`` does; a flow-style ``extenders: [...]`` is
re-serialised instead, with a note). A config that already has an extender at the same URL is
refused (exit 2) unless ``--replace``, which puts the new entry in its place (comments and the rest
kept), as is one whose extenders already manage a resource given to this one.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from typing import Any

import yaml

from policy_extender.verb_names import kube_scheduler as kube

HELP = ("print the extenders: entry of a KubeSchedulerConfiguration for the kube-scheduler rules of "
        "the policy set (or --merge it into your config, everything else kept)")

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
PROTOCOL = "kube-scheduler"

#: kube-scheduler's own default (``DefaultExtenderTimeout``); a filter call that takes longer
#: fails the pod's scheduling attempt unless the extender is ignorable.
DEFAULT_HTTP_TIMEOUT = "5s"

#: The rule kinds behind each verb (kube-spec.md): a verb is registered only when the policy set
#: serves kube-scheduler one of them.
RULE_KINDS = {kube.FILTER: ("filter",), kube.PRIORITIZE: ("score",), kube.PREEMPT: ("victim", "preemptable")}

#: v1 ``Extender``'s fields as its JSON tags name them, each with the YAML type it decodes from:
#: "str", "int", "bool", "duration" (a ``metav1.Duration``: a Go duration string), "tls" (an
#: ``ExtenderTLSConfig`` mapping), "resources" (a list of ``ExtenderManagedResource``).
EXTENDER_FIELDS = {"urlPrefix": "str", "filterVerb": "str", "preemptVerb": "str", "prioritizeVerb": "str",
                   "weight": "int", "bindVerb": "str", "enableHTTPS": "bool", "tlsConfig": "tls",
                   "httpTimeout": "duration", "nodeCacheCapable": "bool", "managedResources": "resources",
                   "ignorable": "bool"}
TLS_FIELDS = {"insecure": "bool", "serverName": "str", "certFile": "str", "keyFile": "str", "caFile": "str",
              "certData": "str", "keyData": "str", "caData": "str"}
RESOURCE_FIELDS = {"name": "str", "ignoredByScheduler": "bool"}

#: Go's time.ParseDuration units, in nanoseconds.
_GO_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000, "s": 10**9, "m": 60 * 10**9,
             "h": 3600 * 10**9}
_GO_DURATION = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")
#: k8s.io/apimachinery's IsQualifiedName: an optional DNS subdomain prefix, a name of <= 63.
_QUALIFIED_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


class KubeSchedulerConfError(Exception):
    """A user-facing error: where, what, how to fix."""


# ---------------------------------------------------------------------------------------------
# the command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = ("The verbs follow the rules the policy set serves kube-scheduler (files with "
                     "`protocol kube-scheduler`). Exit 0 with the entry (or the merged config) on "
                     "stdout and notes on stderr, 2 on an error.")
    parser.add_argument("policy_dirs", nargs="*", metavar="POLICY_DIR",
                        help="the policy directories serve will load (default: the serve config's policy_dirs)")
    parser.add_argument("--values", metavar="FILE",
                        help="the values file of the set (default: the serve config's values_file)")
    parser.add_argument("--config", metavar="FILE",
                        help="serve's YAML configuration (bind, kube_scheduler_prefix, kube_scheduler_verbs, "
                             "policy_dirs, certfile), read like serve reads it, POLICY_EXTENDER_* variables included")
    parser.add_argument("--url", metavar="URL",
                        help="the service as kube-scheduler reaches it, e.g. "
                             "http://policy-extender.kube-system.svc:8713; kube_scheduler_prefix is appended "
                             "unless the URL ends with it (default: the config's bind, when kube-scheduler "
                             "can dial it: a sidecar's 127.0.0.1:8713)")
    parser.add_argument("--weight", default="1", metavar="N",
                        help="weight: kube-scheduler multiplies the 0..10 scores by N x 10 (an integer >= 1; "
                             "default 1; left out when no rule scores)")
    parser.add_argument("--http-timeout", default=DEFAULT_HTTP_TIMEOUT, metavar="DURATION",
                        help=f"httpTimeout, a Go duration such as 500ms or 5s (default {DEFAULT_HTTP_TIMEOUT}, "
                             "kube-scheduler's own): a filter or preempt call that takes longer fails the "
                             "pod's attempt unless ignorable")
    parser.add_argument("--ignorable", choices=("true", "false"), default="true",
                        help="ignorable: true = a failed or unreachable call is skipped (default), false = "
                             "fail closed: the pods it manages stay pending while the service is down")
    parser.add_argument("--managed-resource", action="append", default=[], metavar="NAME",
                        help="send kube-scheduler only the pods requesting extended resource NAME (e.g. "
                             "nvidia.com/gpu; repeat; default: every pod)")
    parser.add_argument("--tls-ca-file", metavar="PATH",
                        help="tlsConfig.caFile: the CA that signed the service's certificate, as a path on "
                             "kube-scheduler's host (for an https:// URL)")
    parser.add_argument("--merge", metavar="FILE",
                        help="print FILE (your KubeSchedulerConfiguration, or - for stdin) with the entry "
                             "appended to its extenders:, everything else kept")
    parser.add_argument("--replace", action="store_true",
                        help="with --merge: replace the extender FILE already has at this URL (else: exit 2)")


def run(args: argparse.Namespace) -> int:
    from policy_extender import config as config_module  # lazy: commands/__init__
    try:
        try:
            config = config_module.load({}, config_file=args.config)
        except config_module.ConfigError as error:
            raise KubeSchedulerConfError(f"the serve configuration: {error}") from None
        kinds = served_rule_kinds(args.policy_dirs or config.policy_dirs, args.values or config.values_file)
        url, notes = url_prefix(config, args.url)
        entry = extender_entry(url, verbs_for(kinds, config), weight=_int(args.weight, "--weight"),
                               http_timeout=args.http_timeout, ignorable=args.ignorable == "true",
                               managed_resources=args.managed_resource, tls_ca_file=args.tls_ca_file)
        problems = check_extender(entry)
        if problems:
            raise KubeSchedulerConfError("; ".join(problems))
        if args.merge:
            source = "<stdin>" if args.merge == "-" else args.merge
            text = sys.stdin.read() if args.merge == "-" else _read(args.merge)
            result = merge(text, entry, where=source, replace=args.replace)
            out, notes = result.text, notes + result.notes
        else:
            out = render_entry(entry)
    except KubeSchedulerConfError as error:
        print(f"policy-extender kube-scheduler-conf: {error}", file=sys.stderr)
        return 2
    for note in notes + _verb_notes(entry):
        print(f"policy-extender kube-scheduler-conf: note: {note}", file=sys.stderr)
    sys.stdout.write(out)
    return 0


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as error:
        raise KubeSchedulerConfError(f"{path}: cannot read: {error.strerror}; name your KubeSchedulerConfiguration "
                        "file, or - for stdin") from None
    except UnicodeDecodeError:
        raise KubeSchedulerConfError(f"{path}: not UTF-8 text; a KubeSchedulerConfiguration is YAML") from None


def _int(text: str, flag: str) -> int:
    if not re.fullmatch(r"[+-]?\d+", text.strip()):
        raise KubeSchedulerConfError(f"{flag} {text!r} is not an integer; kube-scheduler wants a whole number >= 1")
    return int(text)


def _verb_notes(entry: dict) -> list[str]:
    missing = [name for name in ("filterVerb", "prioritizeVerb", "preemptVerb") if name not in entry]
    if not missing:
        return []
    why = {"filterVerb": "no filter rule", "prioritizeVerb": "no score rule",
           "preemptVerb": "no victim or preemptable rule"}
    return [f"{name} left out: the policy set serves kube-scheduler {why[name]}" for name in missing]


# ---------------------------------------------------------------------------------------------
# what the entry says


def served_rule_kinds(policy_dirs, values: str | None = None) -> frozenset[str]:
    """The kinds of the rules the policy set of ``policy_dirs`` (with ``values``) serves kube-scheduler."""
    from policy_extender.errors import PolicyError  # lazy: commands/__init__
    from policy_extender.policyset import load_set, policy_set_source
    from policy_extender.policyset.files import ReadError
    try:
        policy_set = load_set(policy_set_source(list(policy_dirs), values))
    except ReadError as error:
        raise KubeSchedulerConfError(f"{error}") from None
    except PolicyError as error:
        raise KubeSchedulerConfError(f"the policy set does not load (serve would refuse it too):\n{error.render()}") from None
    if not policy_set.sources:
        raise KubeSchedulerConfError(f"no *.policy files in {', '.join(map(str, policy_dirs))}; name the directories "
                        "serve loads (arguments or the config's policy_dirs)")
    kinds = policy_set.for_protocol(PROTOCOL).kinds
    if not kinds & {k for ks in RULE_KINDS.values() for k in ks}:
        raise KubeSchedulerConfError(f"the policy set in {', '.join(map(str, policy_dirs))} serves kube-scheduler no "
                        "rule: kube-scheduler would call verbs that decide nothing. Put `protocol volcano, "
                        "kube-scheduler` (or `protocol kube-scheduler`) at the top of the files whose "
                        "filter, score, victim or preemptable rules it should get (docs/kube-scheduler.md)")
    return kinds


def verbs_for(rule_kinds, config) -> dict[str, str]:
    """kube-scheduler verb kind -> its path segment, for the verbs some rule decides."""
    return {kind: config.kube_scheduler_verb(kind) for kind, decided_by in RULE_KINDS.items()
            if set(decided_by) & set(rule_kinds)}


def url_prefix(config, url: str | None) -> tuple[str, list[str]]:
    """``urlPrefix`` (scheme, host, port, ``kube_scheduler_prefix``) and notes."""
    prefix = config.kube_scheduler_prefix.strip("/")
    if not prefix:
        raise KubeSchedulerConfError("the serve configuration's kube_scheduler_prefix is empty: serve answers no "
                        "kube-scheduler verb; set it (the default is /kube-scheduler/)")
    notes = []
    if url is None:
        bind = config.bind
        host, _, port = bind.rpartition(":")
        if bind.startswith("unix:") or host.strip("[]") in ("0.0.0.0", "::", ""):
            raise KubeSchedulerConfError(f"bind {bind} does not say how kube-scheduler reaches the service: pass --url, "
                            "e.g. --url http://policy-extender.kube-system.svc:8713")
        base = f"{'https' if config.certfile else 'http'}://{host}:{port}"
        if host.startswith("127.") or host in ("[::1]", "localhost"):
            notes.append(f"urlPrefix {base} is loopback: kube-scheduler reaches it only with the service as "
                         "a sidecar in its pod; else pass --url")
    else:
        match = re.fullmatch(r"(https?)://([^/\s?#]+)(/[^\s?#]*)?", url.strip())
        if not match:
            raise KubeSchedulerConfError(f"--url {url!r} is not an http:// or https:// URL such as "
                            "http://policy-extender.kube-system.svc:8713")
        scheme, authority, path = match.group(1), match.group(2), (match.group(3) or "").strip("/")
        if config.certfile and scheme == "http":
            raise KubeSchedulerConfError(f"--url {url} is http://, but the serve config has a certfile: the service speaks "
                            "HTTPS only; use https://")
        if path == prefix or path.endswith("/" + prefix):
            path = path[:-len(prefix)].strip("/")
        base = f"{scheme}://{authority}" + (f"/{path}" if path else "")
    return f"{base}/{prefix}", notes


def extender_entry(url: str, verbs: dict[str, str], weight: int = 1, http_timeout: str = DEFAULT_HTTP_TIMEOUT,
                   ignorable: bool = True, managed_resources=(), tls_ca_file: str | None = None) -> dict:
    """The entry, its fields in the order of kube-spec.md; ``verbs`` from :func:`verbs_for`."""
    timeout = go_duration_ns(http_timeout)
    if timeout is None:
        raise KubeSchedulerConfError(f"--http-timeout {http_timeout!r} is not a Go duration; use e.g. 500ms, 5s, 1m "
                        "(kube-scheduler refuses to start on a value it cannot parse)")
    if timeout <= 0:
        raise KubeSchedulerConfError(f"--http-timeout {http_timeout!r}: a timeout must be > 0 (kube-scheduler takes 0 as "
                        "its default, 5s: write 5s)")
    if weight < 1:
        raise KubeSchedulerConfError(f"--weight {weight}: kube-scheduler requires a positive weight (an integer >= 1) for "
                        "an extender that prioritizes")
    entry: dict[str, Any] = {"urlPrefix": url}
    for kind, field_name in ((kube.FILTER, "filterVerb"), (kube.PRIORITIZE, "prioritizeVerb"),
                             (kube.PREEMPT, "preemptVerb")):
        if kind in verbs:
            entry[field_name] = verbs[kind]
    if kube.PRIORITIZE in verbs:
        entry["weight"] = weight
    entry["enableHTTPS"] = False
    if tls_ca_file:
        entry["tlsConfig"] = {"caFile": tls_ca_file}
    entry["httpTimeout"] = http_timeout
    entry["nodeCacheCapable"] = False
    entry["ignorable"] = ignorable
    entry["managedResources"] = [{"name": name, "ignoredByScheduler": False} for name in managed_resources]
    return entry


def render_entry(entry: dict) -> str:
    """The entry as the YAML of an ``extenders:`` list, with a comment line."""
    return ("extenders:\n# added by policy-extender kube-scheduler-conf (docs/kube-scheduler.md)\n"
            + "".join(_entry_lines(entry, 0, 2)))


# ---------------------------------------------------------------------------------------------
# checking it as kube-scheduler would


def go_duration_ns(text: Any) -> int | None:
    """Go's ``time.ParseDuration`` of ``text`` in nanoseconds, or None when Go would refuse it."""
    if not isinstance(text, str):
        return None
    body = text[1:] if text[:1] in "+-" else text
    if body == "0":
        return 0
    if not body:
        return None
    total, position = 0.0, 0
    while position < len(body):
        match = _GO_DURATION.match(body, position)
        if not match or match.group(1) in ("", "."):
            return None
        total += float(match.group(1)) * _GO_UNITS[match.group(2)]
        position = match.end()
    return int(-total if text.startswith("-") else total)


def is_extended_resource_name(name: str) -> bool:
    """k8s.io/kubernetes ``v1helper.IsExtendedResourceName`` after ``IsQualifiedName``: a
    ``domain/name`` outside ``kubernetes.io``, whose ``requests.`` form is a qualified name too."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    return all(_qualified(candidate) for candidate in (name, "requests." + name))


def _qualified(name: str) -> bool:
    prefix, slash, short = name.rpartition("/")
    if slash and not (prefix and len(prefix) <= 253 and _DNS_SUBDOMAIN.fullmatch(prefix)):
        return False
    return bool(short) and len(short) <= 63 and bool(_QUALIFIED_NAME.fullmatch(short))


def check_extender(entry: Any, where: str = "extender", others=()) -> list[str]:
    """What kube-scheduler would refuse in ``entry`` (one ``extenders:`` item) when it loads its
    config: unknown fields (its decoder is strict), wrong types, and ``validateExtenders``'
    rules; ``others`` are the config's other extenders (managed resources must be distinct)."""
    if not isinstance(entry, dict):
        return [f"{where}: an extender is a mapping of v1 Extender fields"]
    problems = _check_fields(entry, EXTENDER_FIELDS, where)
    if not isinstance(entry.get("urlPrefix"), str) or not entry.get("urlPrefix"):
        problems.append(f"{where}.urlPrefix: required: the extender's URL")
    if entry.get("prioritizeVerb") and not (isinstance(entry.get("weight"), int) and entry["weight"] > 0):
        problems.append(f"{where}.weight: {entry.get('weight')!r}: must have a positive weight applied to it "
                        "(kube-scheduler's validation; an integer >= 1)")
    if "httpTimeout" in entry and (go_duration_ns(entry["httpTimeout"]) or 0) < 0:
        problems.append(f"{where}.httpTimeout: {entry['httpTimeout']!r} is negative")
    if entry.get("nodeCacheCapable") is True:
        problems.append(f"{where}.nodeCacheCapable: true sends node names only and policy-extender keeps no "
                        "node cache; set nodeCacheCapable: false")
    taken = {r.get("name") for other in others if isinstance(other, dict)
             for r in other.get("managedResources") or () if isinstance(r, dict)}
    resources = entry.get("managedResources")
    for index, resource in enumerate(resources if isinstance(resources, list) else ()):
        at = f"{where}.managedResources[{index}].name"
        name = resource.get("name") if isinstance(resource, dict) else None
        if not isinstance(name, str) or not is_extended_resource_name(name):
            problems.append(f"{at}: {name!r} is an invalid extended resource name (a DOMAIN/NAME outside "
                            "kubernetes.io, such as nvidia.com/gpu)")
        elif name in taken:
            problems.append(f"{at}: {name!r}: duplicate extender managed resource name (another extender "
                            "manages it)")
        taken.add(name)
    return problems


def _check_fields(mapping: dict, fields: dict[str, str], where: str) -> list[str]:
    problems = []
    for key, value in mapping.items():
        kind = fields.get(key)
        at = f"{where}.{key}"
        if kind is None:
            problems.append(f"{at}: unknown field (kube-scheduler decodes its config strictly; the fields are "
                            f"{', '.join(fields)})")
        elif kind == "str" and not isinstance(value, str):
            problems.append(f"{at}: {value!r} is not a string")
        elif kind == "int" and (isinstance(value, bool) or not isinstance(value, int) or not -2**63 <= value < 2**63):
            problems.append(f"{at}: {value!r} is not an integer")
        elif kind == "bool" and not isinstance(value, bool):
            problems.append(f"{at}: {value!r} is not true or false")
        elif kind == "duration" and go_duration_ns(value) is None:
            problems.append(f"{at}: {value!r} is not a Go duration such as 5s or 500ms")
        elif kind == "tls":
            problems += (_check_fields(value, TLS_FIELDS, at) if isinstance(value, dict)
                         else [f"{at}: not a mapping of ExtenderTLSConfig fields"])
        elif kind == "resources":
            if not isinstance(value, list):
                problems.append(f"{at}: not a list of {{name: ..., ignoredByScheduler: ...}}")
                continue
            for index, item in enumerate(value):
                problems += (_check_fields(item, RESOURCE_FIELDS, f"{at}[{index}]") if isinstance(item, dict)
                             else [f"{at}[{index}]: not a mapping {{name: ..., ignoredByScheduler: ...}}"])
    return problems


# ---------------------------------------------------------------------------------------------
# merging into the user's KubeSchedulerConfiguration


@dataclass
class MergedSchedulerConfig:
    text: str
    notes: list[str]


def _at(where: str, node) -> str:
    return f"{where}:{node.start_mark.line + 1}:{node.start_mark.column + 1}"


def _key_node(mapping, name: str):
    for key, value in mapping.value:
        if isinstance(key, yaml.ScalarNode) and key.value == name:
            return key, value
    return None, None


def merge(text: str, entry: dict, where: str = "FILE", replace: bool = False) -> MergedSchedulerConfig:
    """``text`` (a KubeSchedulerConfiguration) with ``entry`` appended to its ``extenders:``; with
    ``replace``, an extender already at the entry's URL is replaced in place (else refused)."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f"{where}:{mark.line + 1}:{mark.column + 1}" if mark else where
        raise KubeSchedulerConfError(f"{at}: not valid YAML: {getattr(error, 'problem', None) or error}") from None
    if not isinstance(root, yaml.MappingNode) or not isinstance(data, dict):
        raise KubeSchedulerConfError(f"{where}: not a KubeSchedulerConfiguration: expected a mapping with apiVersion: "
                        f"{API_VERSION} and kind: {KIND}")
    if data.get("kind") == "ConfigMap":
        raise KubeSchedulerConfError(f"{where}: a ConfigMap: give the KubeSchedulerConfiguration file it holds (kubectl get "
                        "configmap NAME -o jsonpath='{.data.KEY}' > config.yaml), then put the result back")
    if data.get("kind") != KIND or data.get("apiVersion") != API_VERSION:
        _, node = _key_node(root, "apiVersion")
        raise KubeSchedulerConfError(f"{_at(where, node or root)}: apiVersion {data.get('apiVersion')!r}, kind "
                        f"{data.get('kind')!r}: expected apiVersion: {API_VERSION} and kind: {KIND} (the "
                        "only version kube-scheduler reads since 1.28; `kubectl convert` does not do "
                        "configs: rename v1beta3 to v1 and check the release notes)")
    key, extenders = _key_node(root, "extenders")
    existing = data.get("extenders")
    if extenders is not None and existing is not None and not isinstance(existing, list):
        raise KubeSchedulerConfError(f"{_at(where, extenders)}: extenders: is not a list; it is a list of extender mappings")
    existing = existing or []
    same = [index for index, other in enumerate(existing) if isinstance(other, dict)
            and str(other.get("urlPrefix", "")).rstrip("/") == entry["urlPrefix"].rstrip("/")]
    if same and not replace:
        raise KubeSchedulerConfError(f"{_at(where, extenders.value[same[0]])}: this config already has an extender at "
                                     f"{entry['urlPrefix']}: edit that entry by hand, or pass --replace to put this "
                                     "command's entry in its place")
    others = [other for index, other in enumerate(existing) if index not in same]
    problems = check_extender(entry, f"extenders[{same[0] if same else len(existing)}]", others=others)
    if problems:
        raise KubeSchedulerConfError(f"{where}: kube-scheduler would refuse the result: {'; '.join(problems)}")
    expected = dict(data)
    if same:
        expected["extenders"] = [entry if index == same[0] else other for index, other in enumerate(existing)
                                 if index == same[0] or index not in same]
        spliced = _splice_replacing(text, extenders, same, entry)
    else:
        expected["extenders"] = [*existing, entry]
        spliced = _splice(text, root, key, extenders, entry)
    if spliced is not None and _loads(spliced) == expected:
        return MergedSchedulerConfig(spliced, [])
    return MergedSchedulerConfig(yaml.safe_dump(expected, sort_keys=False, width=1 << 16),
                  ["the config was re-serialised (its extenders: is a flow list [...] or empty): the objects "
                   "are kept, its comments and layout are not"])


def _loads(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return None


def _splice(text: str, root, key, extenders, entry: dict) -> str | None:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    if key is None:  # no extenders: yet: a new top-level key after the document's last line
        column = root.value[0][0].start_mark.column if root.value else 0
        if root.flow_style:
            return None
        last = _last_line(root)
        block = [" " * column + "extenders:\n"] + _entry_lines(entry, column, column + 2, comment=True)
        return "".join(lines[:last + 1] + block + lines[last + 1:])
    if not isinstance(extenders, yaml.SequenceNode) or extenders.flow_style or not extenders.value:
        return None
    first = extenders.value[0]
    line = lines[first.start_mark.line]
    content = first.start_mark.column
    dash = line.rfind("-", 0, content)
    if dash < 0:
        return None
    last = _last_line(extenders.value[-1])
    block = _entry_lines(entry, dash, content, comment=True)
    return "".join(lines[:last + 1] + block + lines[last + 1:])


def _splice_replacing(text: str, extenders, indexes: list[int], entry: dict) -> str | None:
    """The text with the items ``indexes`` of the block list ``extenders`` cut out (the comment
    line this command wrote above one too) and ``entry`` written where the first one was."""
    if extenders.flow_style:
        return None
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    first_item = extenders.value[indexes[0]]
    content = first_item.start_mark.column
    dash = lines[first_item.start_mark.line].rfind("-", 0, content)
    if dash < 0:
        return None
    cut: set[int] = set()
    for index in indexes:
        item = extenders.value[index]
        start = item.start_mark.line
        if start > 0 and lines[start - 1].strip().startswith("# added by policy-extender kube-scheduler-conf"):
            start -= 1
        cut.update(range(start, _last_line(item) + 1))
    at = min(cut)
    out = []
    for number, line in enumerate(lines):
        if number == at:
            out += _entry_lines(entry, dash, content, comment=True)
        if number not in cut:
            out.append(line)
    return "".join(out)


def _last_line(node) -> int:
    """The 0-based line of the node's last character of content (comments after it excluded)."""
    while isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and not node.flow_style and node.value:
        node = node.value[-1][1] if isinstance(node, yaml.MappingNode) else node.value[-1]
    end = node.end_mark
    if isinstance(node, yaml.ScalarNode) and node.style in ("|", ">"):
        return end.line - 1 if end.column == 0 else end.line
    return end.line if end.column > 0 or end.line == node.start_mark.line else end.line - 1


def _entry_lines(entry: dict, dash: int, column: int, comment: bool = False) -> list[str]:
    """The entry as one block sequence item: ``-`` at ``dash``, its keys at ``column``."""
    pad = " " * column
    out = []
    if comment:
        out.append(f"{' ' * dash}# added by policy-extender kube-scheduler-conf (docs/kube-scheduler.md)\n")
    first = True
    for name, value in entry.items():
        lead = " " * dash + "-" + " " * (column - dash - 1) if first else pad
        first = False
        if isinstance(value, dict):
            out.append(f"{lead}{name}:\n")
            out += [f"{pad}  {k}: {_scalar(v)}\n" for k, v in value.items()]
        elif isinstance(value, list) and value:
            out.append(f"{lead}{name}:\n")
            for item in value:
                out += [f"{pad}{'- ' if i == 0 else '  '}{k}: {_scalar(v)}\n" for i, (k, v) in enumerate(item.items())]
        else:
            out.append(f"{lead}{name}: {_scalar(value)}\n")
    return out


def _scalar(value: Any) -> str:
    dumped = yaml.safe_dump(value, default_flow_style=True, width=1 << 16).strip()
    return dumped.removesuffix("...").strip()
