"""``policy-extender volcano-conf CONF``: the scheduler's own conf with the extender plugin added.

``kubectl apply -k docker/k8s/sidecar`` replaces the whole ``volcano-scheduler-configmap``; this
command instead reads the conf a cluster runs now (a file, or ``-`` for stdin: the bare conf with
``actions:`` and ``tiers:``, or the ConfigMap that holds it under
``data["volcano-scheduler.conf"]``), adds the ``extender`` plugin with every argument at the
place :func:`placement` chooses, and prints the result.

Everything else is kept as it was, byte for byte, comments included: the input is parsed with
``yaml.compose`` (PyYAML's safe loader), which gives each node's position in the text, and the
plugin's lines are spliced into the original text at those positions; nothing is re-serialised.
The result is parsed again and compared with the expected objects before it is printed. Where a
splice is impossible (the tier's ``plugins`` written as a flow list ``[...]``), the whole
document is re-serialised with ``yaml.safe_dump`` instead: the objects are the same but comments
and formatting are lost, and the command says so on stderr.

A conf that already has an ``extender`` plugin is refused (exit 2) unless ``--replace``, which
removes every existing one (and a tier left without plugins) before adding the new one.

``--policies DIR`` (repeatable, with ``--values FILE``: the set serve loads, ``policyset.sets``)
derives the plugin's verbs and managed resources from the set (:func:`derived_extender`, on
``decide.served``): only the verbs its rules serve (and the session verbs with them), ``jobReady``
when it has ``ready`` rules, ``managedResources`` when every filter, score and victim rule is
guarded by a request of an extended resource; a rule kind whose verb ``--omit-verb`` leaves out is
an error, as is a set that decides nothing for Volcano.
"""

from __future__ import annotations

import argparse
import copy
import re
import sys
from dataclasses import dataclass
from typing import Any

import yaml

from policy_extender.verb_names.volcano import (
    JOB_READY, PREEMPTABLE, RECLAIMABLE, VERB_KINDS, VICTIM_PLUGINS, VICTIM_SWITCH,
)

HELP = ("print your Volcano scheduler conf (file or -, bare or its ConfigMap) with the extender "
        "plugin added and everything else kept, comments included")

CONF_KEY = "volcano-scheduler.conf"
PLUGIN = "extender"

#: The tier that receives the extender is the first one holding one of these plugins (Volcano's
#: default first tier: priority, gang, conformance). See :func:`placement`.
ANCHOR_PLUGINS = ("priority", "conformance")

#: Verbs the shipped confs leave out: with ``ignorable: true`` a failed jobReady call answers
#: false, so no job is ready while the service is down, and Volcano's gang plugin already checks
#: readiness (docs/volcano.md, "Point Volcano at it"); ``--include-verb jobReady`` adds it for ready rules.
DEFAULT_OMITTED = (JOB_READY,)
#: The shipped confs' extender.httpTimeout (docs/operations.md, "Choosing extender.httpTimeout").
DEFAULT_HTTP_TIMEOUT = "1s"

#: Volcano's Go duration syntax (time.ParseDuration); an unparsable value silently means 1s there.
GO_DURATION = re.compile(r"(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+")


@dataclass(frozen=True)
class Placement:
    """Where the extender goes: last plugin of tier ``tier``, or (``new_tier``) alone in a new
    tier inserted after tier ``tier``."""

    tier: int
    new_tier: bool = False
    note: str = ""


def placement(tiers: list[list[str]]) -> Placement:
    """The one placement rule (change it here): the extender is appended as the **last** plugin of
    the first tier that holds ``priority`` or ``conformance``, so that it gets the final say among
    that tier's victim functions (a later plugin of the same tier can undo its narrowing: see
    ../shared/volcano-wire.md, tiers). A conf with neither gets it last in its first tier.

    ``tiers`` is each tier's plugin names, in order, without any extender."""
    for index, plugins in enumerate(tiers):
        if any(name in ANCHOR_PLUGINS for name in plugins):
            return Placement(index)
    return Placement(0, note=f"no tier holds {' or '.join(ANCHOR_PLUGINS)}: the extender is the last plugin of the first tier")


class ConfError(Exception):
    """A user-facing error: where, what, how to fix."""


# ---------------------------------------------------------------------------------------------
# the command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = ("Comments and layout of CONF are kept: the plugin is spliced into the text. "
                     "Only when the receiving tier's plugins are a flow list [...] is the whole "
                     "conf re-serialised, which drops its comments (a warning says so). "
                     "Exit 0 with the result on stdout, 2 on an error or an extender already there.")
    parser.add_argument("conf", nargs="?", metavar="CONF",
                        help="the current scheduler conf, or - for stdin (kubectl -n volcano-system get "
                             "configmap volcano-scheduler-configmap -o yaml | policy-extender volcano-conf -)")
    parser.add_argument("--merge", metavar="CONF", help="same as the CONF argument")
    parser.add_argument("--url-prefix", default="http://127.0.0.1:8713",
                        help="extender.urlPrefix (default http://127.0.0.1:8713, the sidecar; the "
                             "standalone Deployment is http://policy-extender.volcano-system.svc:8713)")
    parser.add_argument("--http-timeout", default=DEFAULT_HTTP_TIMEOUT,
                        help=f"extender.httpTimeout, a Go duration (default {DEFAULT_HTTP_TIMEOUT}, the "
                             "shipped conf's; docs/operations.md has the measured open time per "
                             "cluster size)")
    parser.add_argument("--ignorable", choices=("true", "false"), default="true",
                        help="extender.ignorable: true = a failed call is ignored, false = fail closed (default true)")
    parser.add_argument("--managed-resource", action="append", default=[], metavar="NAME",
                        help="add NAME to extender.managedResources (repeat; default [] = every task)")
    parser.add_argument("--omit-verb", action="append", default=[], choices=VERB_KINDS, metavar="KIND",
                        help="leave extender.<KIND>Verb out, so Volcano never calls it (repeat); "
                             f"{', '.join(DEFAULT_OMITTED)} is left out unless --include-verb names it")
    parser.add_argument("--include-verb", action="append", default=[], choices=DEFAULT_OMITTED,
                        metavar="KIND", help="add a verb the shipped conf leaves out: jobReady, for "
                        "policies with ready rules (while the service is down no job is then ready)")
    parser.add_argument("--final-victims", action="store_true",
                        help="make the set's victim rules final: every other plugin's preempt and reclaim victim "
                             "function is switched off (enablePreemptable: false / enableReclaimable: false on "
                             "priority, gang, conformance, drf, proportion, capacity, pdb, cdp, tdm), so a pod the "
                             "policies protect is never evicted by another tier, and an Abstain evicts nothing; "
                             "the set's rules then carry what those plugins did (lower priority only, gangs, "
                             "kube-system): docs/testing-policies.md, \"Protection that holds\"")
    parser.add_argument("--replace", action="store_true",
                        help="replace an extender plugin the conf already has (else: exit 2)")
    parser.add_argument("--policies", action="append", default=[], metavar="DIR",
                        help="derive the verbs and managedResources from the policy set serve loads from DIR "
                             "(repeat for several directories): only the verbs its rules serve")
    parser.add_argument("--values", metavar="FILE", help="with --policies: the set's values file")


def run(args: argparse.Namespace) -> int:
    source = args.merge or args.conf
    if not source or (args.merge and args.conf):
        print("policy-extender volcano-conf: name the current conf once, as CONF or --merge CONF "
              "(- reads stdin)", file=sys.stderr)
        return 2
    try:
        if not GO_DURATION.fullmatch(args.http_timeout):
            raise ConfError(f"--http-timeout {args.http_timeout!r} is not a Go duration; use e.g. 100ms, 1s, 1.5s "
                            "(Volcano silently takes 1s for a value it cannot parse)")
        text = sys.stdin.read() if source == "-" else _read(source)
        omitted = [*args.omit_verb, *(v for v in DEFAULT_OMITTED if v not in args.include_verb)]
        managed, derived_notes = list(args.managed_resource), list[str]()
        if args.policies:
            omitted, managed, derived_notes = derived_extender(_load_set(args.policies, args.values),
                                                               args.omit_verb, args.managed_resource)
        plugin = extender_plugin(args.url_prefix, args.http_timeout, args.ignorable == "true", managed, omitted)
        result = merge(text, plugin, replace=args.replace, where="<stdin>" if source == "-" else source)
    except ConfError as error:
        print(f"policy-extender volcano-conf: {error}", file=sys.stderr)
        return 2
    if getattr(args, "final_victims", False):
        try:
            final = final_victims(result.text, where="<stdin>" if source == "-" else source)
        except ConfError as error:
            print(f"policy-extender volcano-conf: {error}", file=sys.stderr)
            return 2
        result = Merged(final.text, result.notes + final.notes)
    for note in derived_notes + result.notes:
        print(f"policy-extender volcano-conf: note: {note}", file=sys.stderr)
    sys.stdout.write(result.text)
    return 0


def _load_set(dirs: list[str], values: str | None):
    """The policy set serve loads from ``dirs`` with ``values`` (``policyset.sets``)."""
    from policy_extender.errors import PolicyError  # lazy: commands/__init__
    from policy_extender.policyset import load_set, policy_set_source
    from policy_extender.policyset.files import ReadError
    try:
        return load_set(policy_set_source(dirs, values))
    except ReadError as error:
        raise ConfError(str(error)) from None
    except PolicyError as error:
        raise ConfError(f"the policy set does not load (serve would refuse it too):\n{error.render()}") from None


def derived_extender(policy_set, omit_verbs=(), managed_resources=()) -> tuple[list[str], list[str], list[str]]:
    """(verbs to leave out, managedResources, notes) for the extender serving ``policy_set``:
    the verbs no rule serves are left out (``decide.served``), and ``omit_verbs`` too unless a rule
    kind needs one (a ConfError: the rules would never be called); ``managed_resources`` given
    win over the derived ones. Its own function, so other options of the plugin compose with it."""
    from policy_extender.decide.served import served as served_by  # lazy: commands/__init__
    served = served_by(policy_set)
    if not served.kinds_by_verb:
        raise ConfError("the policy set has no rule for Volcano (filter, score, victim, preemptable, reclaimable, "
                        "enqueue, overused, ready): the extender would decide nothing; check the --policies "
                        "directories (or their protocol statements)")
    for verb in omit_verbs:
        if verb in served.kinds_by_verb:
            kinds = " and ".join(sorted(served.kinds_by_verb[verb]))
            raise ConfError(f"--omit-verb {verb}: the set's {kinds} rules are served by {verb}, so Volcano would "
                            f"never call them; drop --omit-verb {verb}, or remove those rules")
    omitted = [v for v in VERB_KINDS if v not in served.verbs or v in omit_verbs]
    notes = [f"{', '.join(omitted)} left out: no rule of the set is served by "
             f"{'them' if len(omitted) > 1 else 'it'}"] if omitted else []
    if JOB_READY in served.verbs:
        notes.append("jobReady registered for the set's ready rules: while the service is down, ignorable: true "
                     "answers false there, so no job is ready until it is back")
    managed = list(managed_resources)
    if not managed and served.managed:
        managed = list(served.managed)
        notes.append(f"managedResources {managed}: every filter, score and victim rule applies only to tasks "
                     "requesting one of them, so Volcano sends no other task")
    elif not managed:
        notes.append(f"managedResources left empty (every task is sent): {served.why_not_managed}")
    return omitted, managed, notes


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as error:
        raise ConfError(f"{path}: cannot read: {error.strerror}; name the conf file, or - for stdin") from None
    except UnicodeDecodeError:
        raise ConfError(f"{path}: not UTF-8 text; the conf is YAML") from None


def extender_plugin(url_prefix: str = "http://127.0.0.1:8713", http_timeout: str = DEFAULT_HTTP_TIMEOUT,
                    ignorable: bool = True, managed_resources=(), omit_verbs=DEFAULT_OMITTED) -> dict:
    """The plugin entry, with the arguments of docker/k8s/sidecar/volcano-scheduler.conf."""
    arguments: dict[str, Any] = {"extender.urlPrefix": url_prefix, "extender.httpTimeout": http_timeout}
    for kind in VERB_KINDS:
        if kind not in omit_verbs:
            arguments[f"extender.{kind}Verb"] = kind
    arguments["extender.ignorable"] = ignorable
    arguments["extender.managedResources"] = list(managed_resources)
    return {"name": PLUGIN, "arguments": arguments}


# ---------------------------------------------------------------------------------------------
# merging


@dataclass
class Merged:
    text: str
    notes: list[str]


def merge(text: str, plugin: dict, replace: bool = False, where: str = "CONF") -> Merged:
    """``text`` (a conf or its ConfigMap) with ``plugin`` added; see the module docstring."""

    root = _compose(text, where)
    if isinstance(root, yaml.MappingNode) and _key(root, "data") is not None and _key(root, "tiers") is None:
        return _merge_configmap(text, root, plugin, replace, where)
    return _merge_conf(text, root, plugin, replace, where)


def _compose(text: str, where: str):

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f"{where}:{mark.line + 1}:{mark.column + 1}" if mark else where
        raise ConfError(f"{at}: not valid YAML: {getattr(error, 'problem', None) or error}") from None
    if root is None:
        raise ConfError(f"{where}: empty; give the scheduler conf (actions: and tiers:) or its ConfigMap")
    return root


def _key(mapping, name: str):
    """The value node of key ``name`` in a MappingNode, or None."""
    for key, value in mapping.value:
        if key.value == name:
            return value
    return None


def _at(where: str, node) -> str:
    return f"{where}:{node.start_mark.line + 1}:{node.start_mark.column + 1}"


def _merge_configmap(text: str, root, plugin: dict, replace: bool, where: str) -> Merged:

    data = _key(root, "data")
    conf_node = _key(data, CONF_KEY) if isinstance(data, yaml.MappingNode) else None
    if not isinstance(conf_node, yaml.ScalarNode):
        raise ConfError(f"{_at(where, root)}: a ConfigMap without data.{CONF_KEY}; give Volcano's "
                        "volcano-scheduler-configmap or the conf file itself")
    inner = _merge_conf(conf_node.value, _compose(conf_node.value, f"{where} data.{CONF_KEY}"),
                        plugin, replace, f"{where} data.{CONF_KEY}")
    key_node = next(k for k, v in data.value if v is conf_node)
    spliced = text[:conf_node.start_mark.index] + _literal_block(inner.text, key_node.start_mark.column + 2) \
        + text[conf_node.end_mark.index:]
    expected = yaml.safe_load(text)
    expected["data"][CONF_KEY] = inner.text
    if _loads(spliced) == expected:
        return Merged(spliced, inner.notes)
    return Merged(yaml.safe_dump(expected, sort_keys=False, width=1 << 16),
                  inner.notes + ["the ConfigMap was re-serialised: its comments and layout are not kept"])


def _literal_block(content: str, indent: int) -> str:
    """``content`` as a YAML literal block scalar whose lines are indented by ``indent``."""
    stripped = content.rstrip("\n")
    chomp = "-" if not content.endswith("\n") else ("+" if content.endswith("\n\n") else "")
    indicator = str(indent) if stripped[:1] in (" ", "\t") else ""
    lines = [(" " * indent + line) if line else "" for line in stripped.split("\n")]
    tail = "\n" * (len(content) - len(stripped)) if chomp == "+" else "\n"
    return f"|{indicator}{chomp}\n" + "\n".join(lines) + tail


def _loads(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return None


def _merge_conf(text: str, root, plugin: dict, replace: bool, where: str) -> Merged:

    tiers_node = _key(root, "tiers") if isinstance(root, yaml.MappingNode) else None
    if not isinstance(tiers_node, yaml.SequenceNode) or not tiers_node.value:
        at = _at(where, tiers_node or root)
        raise ConfError(f"{at}: not a Volcano scheduler conf: it needs a non-empty list under tiers: "
                        "(actions: \"enqueue, allocate, backfill\" and tiers: - plugins: - name: ...)")
    tiers: list = []  # [(tier node, plugins node, [plugin nodes], [names])]
    for tier in tiers_node.value:
        plugins = _key(tier, "plugins") if isinstance(tier, yaml.MappingNode) else None
        if not isinstance(plugins, yaml.SequenceNode):
            raise ConfError(f"{_at(where, tier)}: a tier without a plugins: list; each tier is "
                            "'- plugins:' followed by '- name: ...' entries")
        names = []
        for entry in plugins.value:
            name = _key(entry, "name") if isinstance(entry, yaml.MappingNode) else None
            if not isinstance(name, yaml.ScalarNode):
                raise ConfError(f"{_at(where, entry)}: a plugin without a name; each plugin is '- name: ...'")
            names.append(name.value)
        tiers.append((tier, plugins, list(plugins.value), names))

    existing = [(t, i) for t, (_, _, _, names) in enumerate(tiers) for i, n in enumerate(names) if n == PLUGIN]
    if existing and not replace:
        t, i = existing[0]
        raise ConfError(f"{_at(where, tiers[t][2][i])}: this conf already has an extender plugin (tier {t + 1}); "
                        "edit it by hand, or pass --replace to put this command's extender in its place")

    expected = _loads(text)
    data_tiers = expected["tiers"]
    for t, i in reversed(existing):
        del data_tiers[t]["plugins"][i]
    emptied = [t for t, tier in enumerate(data_tiers) if any(n == PLUGIN for n in tiers[t][3]) and not tier["plugins"]]
    kept_names = [[n for n in names if n != PLUGIN] for t, (*_, names) in enumerate(tiers) if t not in emptied]
    for t in reversed(emptied):
        del data_tiers[t]
    place = placement(kept_names)
    if place.new_tier:
        data_tiers.insert(place.tier + 1, {"plugins": [copy.deepcopy(plugin)]})
    else:
        data_tiers[place.tier]["plugins"].append(copy.deepcopy(plugin))
    notes = [place.note] if place.note else []
    notes += _action_notes(expected.get("actions"))

    spliced = _splice(text, tiers, existing, emptied, place, plugin)
    if spliced is not None and _loads(spliced) == expected:
        return Merged(spliced, notes)
    return Merged(yaml.safe_dump(expected, sort_keys=False, width=1 << 16),
                  notes + ["the conf was re-serialised (its plugins are written as a flow list [...]): "
                           "the objects are kept, its comments and layout are not"])


def _action_notes(actions: Any) -> list[str]:
    names = {a.strip() for a in actions.split(",")} if isinstance(actions, str) else set()
    missing = [a for a in ("preempt", "reclaim") if a not in names]
    if not missing:
        return []
    verbs = " and ".join(PREEMPTABLE if a == "preempt" else RECLAIMABLE for a in missing)
    return [f"actions has no {' or '.join(missing)}: Volcano never calls the {verbs} "
            f"verb{'s' * (len(missing) > 1)} (victim rules) until you add {' and '.join(missing)} to "
            "actions: (left as it is)"]


# ---------------------------------------------------------------------------------------------
# the text splice


def _splice(text: str, tiers: list, existing: list, emptied: list, place: Placement, plugin: dict) -> str | None:
    """The text with the existing extenders (and emptied tiers) cut out and the plugin's lines
    inserted, or None when block-style line surgery is impossible here."""
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    cut: set[int] = set()
    for t, i in existing:
        tier, plugins, entries, _ = tiers[t]
        if plugins.flow_style:
            return None
        node = tier if t in emptied else entries[i]
        first, last = node.start_mark.line, _last_line(node)
        if t in emptied and not _only_item_on_lines(tiers, t, first, last):
            return None
        cut.update(range(first, last + 1))

    kept = [t for t in range(len(tiers)) if t not in emptied]
    tier, plugins, entries, names = tiers[kept[place.tier]]
    if plugins.flow_style:
        return None
    remaining = [e for e, n in zip(entries, names) if n != PLUGIN]
    if place.new_tier:  # a sibling of this tier, laid out like it
        after = _last_line(tier)
        dash, column = _item_columns(lines, tier)
        if not remaining:
            return None
        inner_dash, inner_column = _item_columns(lines, remaining[0])
        block = [" " * dash + "-" + " " * (column - dash - 1) + "plugins:\n"] + _plugin_lines(plugin, inner_dash, inner_column)
    else:
        if not remaining:
            return None
        after = max(_last_line(e) for e in remaining)
        dash, column = _item_columns(lines, remaining[0])
        block = _plugin_lines(plugin, dash, column)
    out = []
    for number, line in enumerate(lines):
        if number not in cut:
            out.append(line)
        if number == after:
            out.extend(block)
    return "".join(out)


def _only_item_on_lines(tiers: list, t: int, first: int, last: int) -> bool:
    others = [tier for n, (tier, *_) in enumerate(tiers) if n != t]
    return not any(first <= o.start_mark.line <= last or first <= _last_line(o) <= last for o in others)


def _last_line(node) -> int:
    """The 0-based line of the node's last character of content (comments after it excluded)."""

    while isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and not node.flow_style and node.value:
        node = node.value[-1][1] if isinstance(node, yaml.MappingNode) else node.value[-1]
    end = node.end_mark
    if isinstance(node, yaml.ScalarNode) and node.style in ("|", ">"):
        return end.line - 1 if end.column == 0 else end.line
    return end.line if end.column > 0 or end.line == node.start_mark.line else end.line - 1


def _item_columns(lines: list[str], node) -> tuple[int, int]:
    """(column of the item's ``-``, column of its content) for a block sequence item."""
    line = lines[node.start_mark.line]
    column = node.start_mark.column
    dash = line.rfind("-", 0, column)
    return (dash if dash >= 0 else max(column - 2, 0)), column


def _plugin_lines(plugin: dict, dash: int, column: int) -> list[str]:
    pad, arg_pad = " " * column, " " * (column + 2)
    lines = [" " * dash + "-" + " " * (column - dash - 1) + f"name: {plugin['name']}\n",
             f"{pad}# added by policy-extender volcano-conf: every argument is explained in its README\n",
             f"{pad}arguments:\n"]
    for key, value in plugin["arguments"].items():
        lines.append(f"{arg_pad}{key}: {_scalar(value)}\n")
    return lines


def _scalar(value: Any) -> str:
    dumped = yaml.safe_dump(value, default_flow_style=True, width=1 << 16).strip()
    return dumped.removesuffix("...").strip()


# ---------------------------------------------------------------------------------------------
# --final-victims


def final_victims(text: str, where: str = "CONF") -> Merged:
    """``text`` (a conf or its ConfigMap, with an extender plugin) with every other plugin's victim
    functions switched off for preempt and reclaim: ``enablePreemptable: false`` and
    ``enableReclaimable: false`` where the plugin registers one (``VICTIM_PLUGINS``, read from
    Volcano's plugins at v1.10.0 to v1.15.1; Session.Preemptable and Session.Reclaimable skip a
    plugin whose switch is false). The extender is then the only plugin with a say: its Permit is
    the victims, its empty Permit or its Abstain evicts nothing, whatever the tiers. Lines are
    added or values changed in place (comments kept) unless a plugin is written as a flow mapping;
    then the conf is re-serialised and a note says so."""
    root = _compose(text, where)
    if isinstance(root, yaml.MappingNode) and _key(root, "data") is not None and _key(root, "tiers") is None:
        data = _key(root, "data")
        conf_node = _key(data, CONF_KEY) if isinstance(data, yaml.MappingNode) else None
        if not isinstance(conf_node, yaml.ScalarNode):
            raise ConfError(f"{_at(where, root)}: a ConfigMap without data.{CONF_KEY}")
        inner = final_victims(conf_node.value, f"{where} data.{CONF_KEY}")
        key_node = next(k for k, v in data.value if v is conf_node)
        spliced = text[:conf_node.start_mark.index] + _literal_block(inner.text, key_node.start_mark.column + 2) \
            + text[conf_node.end_mark.index:]
        expected = yaml.safe_load(text)
        expected["data"][CONF_KEY] = inner.text
        if _loads(spliced) == expected:
            return Merged(spliced, inner.notes)
        return Merged(yaml.safe_dump(expected, sort_keys=False, width=1 << 16),
                      inner.notes + ["the ConfigMap was re-serialised: its comments and layout are not kept"])
    tiers_node = _key(root, "tiers") if isinstance(root, yaml.MappingNode) else None
    if not isinstance(tiers_node, yaml.SequenceNode):
        raise ConfError(f"{_at(where, root)}: not a Volcano scheduler conf (no tiers: list)")
    expected = _loads(text)
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement) in text
    switched: list[str] = []
    found_extender = False
    line_starts = [0]
    for line in text.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))
    for t, tier in enumerate(tiers_node.value):
        plugins = _key(tier, "plugins") if isinstance(tier, yaml.MappingNode) else None
        for p, entry in enumerate(plugins.value if isinstance(plugins, yaml.SequenceNode) else ()):
            name_node = _key(entry, "name") if isinstance(entry, yaml.MappingNode) else None
            name = name_node.value if isinstance(name_node, yaml.ScalarNode) else None
            if name == PLUGIN:
                found_extender = True
                continue
            for action in VICTIM_PLUGINS.get(name or "", ()):
                switch = VICTIM_SWITCH[action]
                expected["tiers"][t]["plugins"][p][switch] = False
                value = _key(entry, switch)
                if value is not None:
                    if value.value != "false":
                        edits.append((value.start_mark.index, value.end_mark.index, "false"))
                        switched.append(f"{name} {switch}")
                    continue
                name_key = next(k for k, v in entry.value if v is name_node)
                assert name_node is not None  # a plugin with victim functions has a name
                after = line_starts[min(name_node.end_mark.line + 1, len(line_starts) - 1)]
                edits.append((after, after, " " * name_key.start_mark.column + f"{switch}: false\n"))
                switched.append(f"{name} {switch}")
    if not found_extender:
        raise ConfError(f"{_at(where, tiers_node)}: no extender plugin in the tiers: --final-victims makes the "
                        "extender's victim answers final, so the conf needs it (this command adds it)")
    out = text if text.endswith("\n") or not edits else text + "\n"
    for start, end, replacement in sorted(edits, reverse=True):
        out = out[:start] + replacement + out[end:]
    notes = [f"--final-victims: switched off {', '.join(switched)}: the policies' victim rules alone choose "
             "victims in preempt and reclaim"] if switched else []
    if _loads(out) == expected:
        return Merged(out, notes)
    return Merged(yaml.safe_dump(expected, sort_keys=False, width=1 << 16),
                  notes + ["the conf was re-serialised (a plugin is written as a flow mapping): the objects are "
                           "kept, its comments and layout are not"])
