"""``policy-extender configmap DIR``: the ConfigMap that ships the policy set of DIR.

The set is read and compiled exactly as ``serve`` loads it (``policyset.files``: the ``*.policy``
files directly in DIR); a set that does not compile, or holds no policy file, is refused with the
errors (exit 1), so a ConfigMap this prints always loads. The output is one ConfigMap (YAML, keys
in a stable order, each file a literal block) holding every file of the set, with
``--fixtures`` the ``*.fixtures.yaml`` files beside them too (serve ignores them: the version is
the same), and the set's version as the annotation ``VERSION_ANNOTATION``: the version serve
reports (``/status``, ``policy_extender_policy_info``) once the kubelet has the new files.

``--values FILE`` adds the cluster's values file to the set (``policyset.sets``: one policy
directory, one ConfigMap per cluster: ``configmap gpu-policies --values clusters/prod-values.yaml``);
it is a key of the ConfigMap under its own name, so serve, given the mounted directory alone, loads
the very set (and version) that was checked.

``--check FILE`` prints nothing but differences: exit 0 when FILE holds the same ConfigMap (the
same objects, whatever the comments or layout), 1 with a summary of what differs (files added,
removed or changed, name, namespace, version) when it does not: for CI, after the generated file
was checked in. Exit 2 when DIR or FILE cannot be read.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from typing import Any

HELP = ("print the policy set of DIR as one ConfigMap (checked as serve loads it); "
        "--check FILE exits 1 when FILE differs")

#: The annotation that carries the policy set's version (the first 16 hex digits of its hash).
VERSION_ANNOTATION = "policy-extender/policy-version"
DEFAULT_NAME = "policy-extender-policies"
FIXTURE_SUFFIX = ".fixtures.yaml"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", metavar="DIR", help="the policy directory (its *.policy files, as serve loads them)")
    parser.add_argument("--name", default=DEFAULT_NAME, help=f"the ConfigMap's name (default: {DEFAULT_NAME})")
    parser.add_argument("--namespace", metavar="NS", help="the ConfigMap's namespace (default: none, the "
                        "namespace kubectl or the kustomization gives)")
    parser.add_argument("--values", metavar="FILE",
                        help="the cluster's values file: DIR and FILE are the set (one ConfigMap per cluster)")
    parser.add_argument("--fixtures", action="store_true",
                        help="hold the *.fixtures.yaml files of DIR too (serve ignores them)")
    parser.add_argument("--check", metavar="FILE",
                        help="print nothing but differences: exit 1 with a summary when FILE is not "
                             "the ConfigMap DIR gives (for CI)")


def run(args: argparse.Namespace) -> int:
    from policy_extender.errors import PolicyError  # lazy: commands/__init__
    from policy_extender.policyset.files import ReadError
    if not os.path.isdir(args.directory):
        print(f"policy-extender configmap: {args.directory}: no such directory; give the directory "
              "of the policy set (the one serve's policy_dirs names)", file=sys.stderr)
        return 2
    try:
        configmap = build(args.directory, args.name, args.namespace, args.fixtures, args.values)
    except PolicyError as error:
        print(f"{error.render()}\npolicy-extender configmap: the policies in {_set_words(args)} do not "
              "load, so no ConfigMap was made: fix the errors above (policy-extender check "
              f"{args.directory}{' --values ' + args.values if args.values else ''} shows them too)", file=sys.stderr)
        return 1
    except (ReadError, EmptySet) as error:
        print(f"policy-extender configmap: {error}", file=sys.stderr)
        return 1
    _warn_left_out(args.directory)
    if args.check:
        return _check(args.check, configmap, _set_words(args), _command(args))
    sys.stdout.write(render(configmap, _command(args)))
    return 0


class EmptySet(Exception):
    """The directory holds no policy file: serve would refuse the set."""


def _set_words(args: argparse.Namespace) -> str:
    return f"{args.directory} with {args.values}" if args.values else args.directory


def build(directory: str, name: str = DEFAULT_NAME, namespace: str | None = None,
          fixtures: bool = False, values: str | None = None) -> dict[str, Any]:
    """The ConfigMap object of the policy set of ``directory`` with ``values``; raises PolicyError
    when the set does not compile, EmptySet when it holds no policy file, ReadError when it cannot
    be read."""
    from policy_extender.policyset import compile_sources, policy_set_source, read_set  # lazy: commands/__init__
    sources = read_set(policy_set_source([directory], values))
    if not any(name.endswith(".policy") for name in sources):
        raise EmptySet(f"{directory}: no policy file (*.policy) directly in "
                       "it: serve would refuse an empty set; add the policy files, or name the "
                       "directory that holds them")
    policy_set = compile_sources(sources)
    data = dict(sources)
    if fixtures:
        data.update(_fixture_files(directory))
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    metadata["annotations"] = {VERSION_ANNOTATION: policy_set.version}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata,
            "data": {key: data[key] for key in sorted(data)}}


def _fixture_files(directory: str) -> dict[str, str]:
    """The ``*.fixtures.yaml`` files beside the policies, read by the same reader."""
    from policy_extender.policyset.files import read_snapshot  # lazy: commands/__init__
    return read_snapshot([directory], (FIXTURE_SUFFIX,)).sources()


def render(configmap: dict[str, Any], command: str) -> str:
    """The ConfigMap as YAML: a header naming the command that made it, the keys in the order
    built, every multi-line value a literal block."""
    import yaml  # lazy: commands/__init__

    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    body = yaml.dump(configmap, Dumper=Dumper, sort_keys=False, allow_unicode=True, width=100000,
                     default_flow_style=False)
    return (f"# Generated by `{command}`: do not edit, run it again after changing the policies.\n"
            "# The annotation is the version serve reports once the kubelet has these files.\n" + body)


def _command(args: argparse.Namespace) -> str:
    parts = ["policy-extender configmap", args.directory]
    if args.name != DEFAULT_NAME:
        parts += ["--name", args.name]
    if args.namespace:
        parts += ["--namespace", args.namespace]
    if args.values:
        parts += ["--values", args.values]
    if args.fixtures:
        parts.append("--fixtures")
    return " ".join(parts)


def _check(path: str, configmap: dict[str, Any], directory: str, command: str) -> int:
    import yaml  # lazy: commands/__init__
    try:
        with open(path, encoding="utf-8") as f:
            found = [doc for doc in yaml.safe_load_all(f) if doc is not None]
    except OSError as error:
        print(f"policy-extender configmap: {path}: {error.strerror}", file=sys.stderr)
        return 2
    except yaml.YAMLError as error:
        print(f"policy-extender configmap: {path}: not YAML ({error}); make it again: {command} > {path}",
              file=sys.stderr)
        return 1
    differences = differences_from(found[0] if len(found) == 1 and isinstance(found[0], dict) else None, configmap)
    if not differences:
        return 0
    print(f"{path} is not the ConfigMap of {directory}:", file=sys.stderr)
    for line in differences:
        print(f"  {line}", file=sys.stderr)
    print(f"make it again: {command} > {path}", file=sys.stderr)
    return 1


def differences_from(found: dict[str, Any] | None, wanted: dict[str, Any]) -> list[str]:
    """One line per difference between the ConfigMap ``found`` in a file and the one ``wanted``."""
    if found is None or found.get("kind") != "ConfigMap":
        return ["the file does not hold one ConfigMap"]
    lines = []
    if found.get("apiVersion") != wanted["apiVersion"]:
        lines.append(f"apiVersion: {found.get('apiVersion')!r}, should be {wanted['apiVersion']!r}")
    have_meta, want_meta = found.get("metadata") or {}, wanted["metadata"]
    for field in ("name", "namespace"):
        if have_meta.get(field) != want_meta.get(field):
            lines.append(f"metadata.{field}: {have_meta.get(field)!r}, should be {want_meta.get(field)!r}")
    have_version = (have_meta.get("annotations") or {}).get(VERSION_ANNOTATION)
    want_version = want_meta["annotations"][VERSION_ANNOTATION]
    if have_version != want_version:
        lines.append(f"policy version {have_version}, the directory's is {want_version}")
    have, want = found.get("data") or {}, wanted["data"]
    for key in sorted(set(want) - set(have)):
        lines.append(f"{key}: in the directory, missing from the file (added)")
    for key in sorted(set(have) - set(want)):
        lines.append(f"{key}: in the file, not in the directory (deleted)")
    for key in sorted(k for k in set(have) & set(want) if have[k] != want[k]):
        lines.append(f"{key}: changed in the directory ({_line_changes(str(have[key]), want[key])})")
    return lines


def _line_changes(old: str, new: str) -> str:
    added = removed = 0
    for line in difflib.ndiff(old.splitlines(), new.splitlines()):
        added += line.startswith("+ ")
        removed += line.startswith("- ")
    return f"{added} line{'s' * (added != 1)} added, {removed} removed"


def _warn_left_out(directory: str) -> None:
    """Policy files in subdirectories are not in the set, so not in the ConfigMap: say so, once
    per subdirectory."""
    from collections import Counter  # lazy: commands/__init__

    from policy_extender.policyset import SUFFIXES
    from policy_extender.policyset.files import files_outside_set
    counts = Counter(os.path.dirname(f) for f in files_outside_set(directory, SUFFIXES))
    for subdirectory, count in sorted(counts.items()):
        print(f"policy-extender configmap: note: {subdirectory}/ ({count} policy file{'s' * (count != 1)}) is "
              f"not part of the set of {directory}, so not in the ConfigMap (serve loads only the files "
              "directly in a directory)", file=sys.stderr)
