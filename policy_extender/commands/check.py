"""``policy-extender check [PATHS]``: lint policy files, as the service would load them.

Each directory is one policy set, read by the reader ``serve`` uses (``policyset.read_sources``:
the ``*.policy`` files directly in it; a kubelet-mounted ConfigMap is its ``..data`` payload,
hidden entries skipped), so the set and its version are the ones serve reports. A subdirectory is
not part of it (serve never loads it): its policy files are reported as left out, and checked
only when the subdirectory is named too. Files named directly are compiled with the other files
named from their directory. Exit 0 with a one-line summary, 1 on any error (every error rendered
``file:line:col`` with the source line and a caret), 2 when a path does not exist or no set holds
a policy file. Warnings (an unused ``let``) of a set that compiles are shown the same way and do
not change the exit status, unless ``--strict``: then they count as errors (exit 1).

``--values FILE`` makes the PATHs one set with that values file (``policyset.sets``: the set serve
loads with ``values_file``); given several times, each values file is checked as a set of its own
with the same PATHs (``check gpu-policies --values clusters/dev-values.yaml --values
clusters/prod-values.yaml``: one set per cluster, no symlink directory).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
from pathlib import Path

from policy_extender.commands import missing_paths
from policy_extender.errors import PolicyError

HELP = "lint policy files: every error as file:line:col with the source line and a caret; exit 1 on any error"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", default=["policies"], metavar="PATH",
                        help="policy files or directories of *.policy files (default: policies)")
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="text for people (default), json for tools")
    parser.add_argument("--values", action="append", default=[], metavar="FILE",
                        help="the cluster's values file: the PATHs and FILE are one set, as serve loads "
                             "them with values_file; repeat to check one set per cluster")
    parser.add_argument("--strict", action="store_true",
                        help="treat warnings (an unused let) as errors: exit 1 when there is one")
    parser.add_argument("--cost", action="store_true",
                        help="print each rule's estimated cost per call, in nodes (N), this cycle's allocations "
                             "(A), tasks of a job (J), tasks on a node (T) and queues (Q)")
    parser.add_argument("--scale", metavar="nodes=N,tasks=M[,allocations=A]",
                        help="evaluate every rule, alone, on a generated cluster of that size and report each "
                             "rule's worst call (elements visited, time); exit 1 when a rule errs there")
    parser.add_argument("--scheduler-conf", metavar="CONF",
                        help="the Volcano scheduler conf (or its ConfigMap) the set is deployed with: warn "
                             "(W301, W302) where another plugin's victims can override a victim rule's protection")


def run(args: argparse.Namespace) -> int:
    if missing_paths("check", [*args.paths, *getattr(args, "values", [])]):
        return 2
    conf = None
    if getattr(args, "scheduler_conf", None):
        conf = _read_scheduler_conf(args.scheduler_conf)
        if conf is None:
            return 2
    sets = policy_sets(args.paths)
    if getattr(args, "values", None):  # the PATHs are one set, once per values file
        merged = tuple(p for paths in sets for p in paths)
        runs = [check_set(merged, values, conf) for values in args.values]
    else:
        runs = [check_set(paths, None, conf) for paths in sets]
    reports = [r for r in runs if r["files"] or r["diagnostics"]]
    left_out = not_loaded(sets)
    if not reports:
        print(f"policy-extender check: no *.policy files in {', '.join(args.paths)}"
              f"{_left_out_note(left_out)}", file=sys.stderr)
        return 2
    scale = None
    if getattr(args, "scale", None):  # a Namespace built by hand (tests) may lack the newer options
        from policy_extender.fixture_runner.scale import Scale  # lazy: commands/__init__
        try:
            scale = Scale.parse(args.scale)
        except ValueError as error:
            print(f"policy-extender check: {error}", file=sys.stderr)
            return 2
    if getattr(args, "cost", False) or scale is not None:
        for paths, report in zip(sets, [check_set(paths) for paths in sets]):
            _measure(paths, report, reports, getattr(args, "cost", False), scale)
    (_print_json if args.format == "json" else _print_text)(reports, left_out, args.strict)
    erred = any(m["error"] for r in reports for m in r.get("scale", {}).get("rules", ()))
    return 1 if erred or any(r["diagnostics"] or (args.strict and r["warnings"]) for r in reports) else 0


def _measure(paths: tuple[Path, ...], report: dict, reports: list[dict], cost: bool, scale) -> None:
    """Add to the report of ``paths`` (in ``reports``) its rules' cost estimates and, with
    ``scale``, each rule measured on a generated cluster of that size (``fixture_runner.scale``)."""
    from policy_extender.policyset import compile_sources, read_sources  # lazy: commands/__init__
    mine = next((r for r in reports if r["files"] == report["files"]), None)
    if mine is None or mine["diagnostics"]:
        return
    policy_set = compile_sources(read_sources(paths))
    where = {r.name: f"{_paths_of(paths, policy_set.sources).get(r.file, r.file)}:{r.line}" for r in policy_set.rules}
    if cost:
        mine["costs"] = [{"rule": c.rule, "kind": c.kind, "where": where.get(c.rule, ""), "cost": c.text(),
                          "quadratic": c.degree >= 2} for c in policy_set.costs]
    if scale is not None:
        from policy_extender.fixture_runner.scale import Bench  # lazy: commands/__init__
        bench = Bench(policy_set, scale)
        try:
            measured = bench.measure()
        finally:
            bench.close()
        mine["scale"] = {"cluster": scale.text(), "open_seconds": round(bench.open_seconds, 3),
                         "rules": [{"rule": m.rule, "kind": m.kind, "verb": m.verb, "where": where.get(m.rule, ""),
                                    "elements": m.elements, "ms": round(m.seconds * 1e3, 3), "error": m.error}
                                   for m in measured]}


def policy_sets(paths) -> list[tuple[Path, ...]]:
    """The sets to check, each the paths serve would be given: one named directory, or the files
    named directly from one directory."""
    directories: list[tuple[Path, ...]] = []
    files: dict[Path, list[Path]] = {}
    for path in map(Path, paths):
        if path.is_dir():
            if (path,) not in directories:
                directories.append((path,))
        elif path not in files.setdefault(path.parent, []):
            files[path.parent].append(path)
    return directories + [tuple(group) for group in files.values()]


def not_loaded(sets: list[tuple[Path, ...]]) -> list[str]:
    """The policy files under the directories checked that no checked set holds: serve, given
    the same directories, would not load them either (a set never reaches into subdirectories)."""
    from policy_extender.policyset import SUFFIXES  # lazy: commands/__init__
    from policy_extender.policyset.files import files_outside_set
    checked = {Path(os.path.realpath(p)) for paths in sets for p in paths}
    found: list[str] = []
    for paths in sets:
        if len(paths) == 1 and paths[0].is_dir():
            found += [f for f in files_outside_set(str(paths[0]), SUFFIXES)
                      if Path(os.path.realpath(os.path.dirname(f))) not in checked
                      and Path(os.path.realpath(f)) not in checked and f not in found]
    return found


def _left_out_note(left_out: list[str]) -> str:
    """What the sets checked leave out, one file a line, and how to check it."""
    if not left_out:
        return ""
    directories = sorted({os.path.dirname(f) for f in left_out})
    files = "".join(f"\n  {f}" for f in left_out)
    return (f"\n{len(left_out)} policy file{'s' * (len(left_out) != 1)} in subdirectories "
            f"{'are' if len(left_out) != 1 else 'is'} not part of any set checked, and serve given the "
            f"same directories would not load {'them' if len(left_out) != 1 else 'it'} (a policy set is "
            f"the *.policy files directly in its directory):{files}\n"
            f"check them as a set of their own: policy-extender check {' '.join(directories)}")


def _read_scheduler_conf(path: str) -> tuple[str, dict] | None:
    """(its name, the conf) of --scheduler-conf: a bare conf or Volcano's ConfigMap holding it;
    None after saying on stderr what is wrong with it."""
    import yaml
    try:
        document = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        if isinstance(document, dict) and "tiers" not in document and isinstance(document.get("data"), dict):
            document = yaml.safe_load(document["data"].get("volcano-scheduler.conf") or "")
    except OSError as error:
        print(f"policy-extender check: --scheduler-conf {path}: cannot read: {error.strerror}", file=sys.stderr)
        return None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
        print(f"policy-extender check: {at}: the scheduler conf is not valid YAML", file=sys.stderr)
        return None
    if not isinstance(document, dict) or not isinstance(document.get("tiers"), list):
        print(f"policy-extender check: --scheduler-conf {path}: not a Volcano scheduler conf (no tiers: list), "
              "nor its ConfigMap (data: volcano-scheduler.conf)", file=sys.stderr)
        return None
    return path, document


def check_set(paths: tuple[Path, ...], values: str | None = None, conf: tuple[str, dict] | None = None) -> dict:
    """Compile one set (``paths`` with the values file ``values``): its files, rule count and
    version, or every diagnostic. Files are named by their path, so an editor can open what the
    diagnostics point at. With ``conf`` (its name and the parsed scheduler conf), the victim
    rules it overrides are warned about too."""
    from policy_extender.policyset import compile_sources, read_set  # lazy: commands/__init__
    from policy_extender.policyset.files import ReadError
    report = {"files": [], "rules": 0, "version": None, "diagnostics": [], "rendered": "", "warnings": []}
    try:
        source = _source_of(paths, values)
        report["set"] = source.describe()
        sources = read_set(source)
    except ReadError as error:
        first = str(paths[0])
        report.update(diagnostics=[_unreadable(first, str(error))], rendered=f"{first}:1:1: error: {error}")
        return report
    except PolicyError as error:  # E407, one file name twice
        report.update(diagnostics=error.to_dicts(), rendered=error.render())
        return report
    where = _paths_of((*paths, *([Path(values)] if values else [])), sources)
    report["files"] = [where[name] for name in sorted(sources)]
    try:
        policy_set = compile_sources(sources)
    except PolicyError as error:
        shown = PolicyError([_renamed(d, where) for d in error.diagnostics],
                            {where.get(name, name): text for name, text in sources.items()})
        report.update(diagnostics=shown.to_dicts(), rendered=shown.render())
    else:
        report.update(rules=len(policy_set.rules), version=policy_set.version)
        warned = list(policy_set.warnings)
        if conf is not None:
            from policy_extender import lang
            from policy_extender.lang import tiers
            warned += tiers.warnings(lang.compile(sources).rules, conf[1], conf[0])
        if warned:
            shown = PolicyError([_renamed(d, where) for d in warned],
                                {where.get(name, name): text for name, text in sources.items()})
            report.update(warnings=shown.to_dicts(), rendered=shown.render())
    return report


def _source_of(paths: tuple[Path, ...], values: str | None = None):
    """The set of ``paths`` and ``values`` as ``policyset.sets`` builds it (without ``values``, a
    values file named among the paths is its values)."""
    from policy_extender.policyset.sets import policy_set_source, source_of_paths  # lazy: commands/__init__
    return policy_set_source(paths, values) if values else source_of_paths(paths)


def _paths_of(paths: tuple[Path, ...], sources: dict[str, str]) -> dict[str, str]:
    """{file name: the path a user would open} for the files of one set."""
    where = {}
    for path in paths:
        for name in sources:
            candidate = path / name if path.is_dir() else path
            if candidate.name == name and name not in where and candidate.exists():
                where[name] = str(candidate)
    return where


def _renamed(diagnostic, where: dict[str, str]):
    from policy_extender.lang import codes  # lazy: commands/__init__
    span = diagnostic.span
    if span is None or span.file not in where:
        return diagnostic
    message = diagnostic.message
    if diagnostic.code == codes.E002:  # two values files: name both by the paths to open
        for name, path in where.items():
            message = re.sub(rf"(?<![\w/.-]){re.escape(name)}(?![\w.-])", path.replace("\\", "\\\\"), message)
    return dataclasses.replace(diagnostic, message=message, span=dataclasses.replace(span, file=where[span.file]))


def _unreadable(where: str, message: str) -> dict:
    from policy_extender.lang import codes  # lazy, like the compiler above
    return {"code": codes.E000, "message": f"cannot read: {message}", "hint": None,
            "file": where, "line": 1, "column": 1, "end_line": 1, "end_column": 1}


def _print_text(reports: list[dict], left_out: list[str], strict: bool = False) -> None:
    errors = sum(len(r["diagnostics"]) for r in reports)
    warnings = sum(len(r["warnings"]) for r in reports)
    for report in reports:
        if report["rendered"]:
            print(report["rendered"], file=sys.stderr)
    if left_out:
        print(f"policy-extender check: warning: {_left_out_note(left_out)[1:]}", file=sys.stderr)
    files = sum(len(r["files"]) for r in reports)
    in_files = f"in {files} policy file{'s' * (files != 1)}"
    warned = f"{warnings} warning{'s' * (warnings != 1)}"
    for report in reports:
        _print_costs(report)
    if errors:
        print(f"{errors} error{'s' * (errors != 1)} {in_files}", file=sys.stderr)
    elif strict and warnings:
        print(f"{warned} {in_files} (--strict: warnings are errors)", file=sys.stderr)
    else:
        rules = sum(r["rules"] for r in reports)
        print(f"ok: {files} policy file{'s' * (files != 1)}, {rules} rule{'s' * (rules != 1)}, no errors"
              + (f", {warned}" if warnings else ""))
        for report in reports if any(" with " in r.get("set", "") for r in reports) else ():
            print(f"  {report['set']}: version {report['version']}")


#: Volcano's default extender.httpTimeout: a call slower than this is marked in --scale's table
SLOW_SECONDS = 1.0


def _print_costs(report: dict) -> None:
    """``--cost``'s estimate per rule and ``--scale``'s measurements, as text."""
    if report.get("costs"):
        print("cost per call (elements visited; N nodes, A this cycle's allocations, J tasks of a job, "
              "T tasks on a node, Q queues):")
        width = max(len(c["where"]) + len(c["rule"]) for c in report["costs"]) + 3
        for c in report["costs"]:
            mark = "  quadratic: W501" if c["quadratic"] else ""
            print(f"  {(c['where'] + ' ' + c['rule']).ljust(width)} {c['kind']:<11} {c['cost']}{mark}")
    scale = report.get("scale")
    if scale:
        print(f"scale: {scale['cluster']} (generated; the session opened in {scale['open_seconds']:.1f} s)")
        print(f"  {'rule':<24} {'kind':<11} {'verb':<15} {'elements':>10} {'ms/call':>10}")
        for m in scale["rules"]:
            note = f"  {m['error']}" if m["error"] else ("  over 1 s (Volcano's default httpTimeout)"
                                                         if m["ms"] > SLOW_SECONDS * 1e3 else "")
            print(f"  {m['rule']:<24} {m['kind']:<11} {m['verb']:<15} {m['elements']:>10,} {m['ms']:>10.1f}{note}")
        if scale["rules"]:
            worst = scale["rules"][0]
            erred = f", {worst['error']}" if worst["error"] else ""
            print(f"worst: rule '{worst['rule']}' ({worst['where']}, {worst['verb']}): {worst['elements']:,} elements, "
                  f"{worst['ms']:.1f} ms a call{erred}")


def _print_json(reports: list[dict], left_out: list[str], strict: bool = False) -> None:
    diagnostics = [d for r in reports for d in r["diagnostics"]]
    warnings = [d for r in reports for d in r["warnings"]]
    sets = [{**{k: r[k] for k in ("set", "files", "rules", "version") if k in r},
             **{k: r[k] for k in ("costs", "scale") if k in r}} for r in reports]
    ok = not diagnostics and not (strict and warnings)
    print(json.dumps({"ok": ok, "sets": sets, "diagnostics": diagnostics + warnings, "not_loaded": left_out},
                     indent=2))
