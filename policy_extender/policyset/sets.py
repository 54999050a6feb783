"""What a policy set is made of, for every command: policy directories plus at most one values
file. ``policy_set_source(dirs, values)`` is the one function that builds it; serve (its config's
``policy_dirs`` and ``values_file``), check, test, eval, replay, configmap, volcano-conf and
kube-scheduler-conf all call it, and read the set it names with ``load_set`` / ``read_set`` (the
one directory reader, ``files.read_snapshot``).

One policy directory can so serve several clusters with no copy and no symlink directory::

    gpu-policies/*.policy
    clusters/dev-values.yaml
    clusters/prod-values.yaml

    policy-extender check gpu-policies --values clusters/dev-values.yaml
    policy-extender configmap gpu-policies --values clusters/prod-values.yaml

The values file is read as a file of the set under its own name (so the set's version changes
with its content and its name, and a ConfigMap made from the set holds it under that name); its
name must end in ``values.yaml``, which is how a file of a set is known as its values file
(``lang.values``). A set with two values files (the directory's own ``values.yaml`` beside the one
named) does not compile: E002 names both.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from policy_extender.lang.values import VALUES_SUFFIX, is_values_file
from policy_extender.policyset.compile import compile_sources, read_sources
from policy_extender.policyset.files import ReadError


@dataclass(frozen=True)
class PolicySetSource:
    """Where a policy set is read from: ``dirs`` (directories, or single policy files) and the
    values file named for it (None: only the directories' own files)."""

    dirs: tuple[str, ...]
    values: str | None = None

    def paths(self) -> list[str]:
        """What the directory reader is given: the directories, then the values file."""
        return [*self.dirs, *([self.values] if self.values else [])]

    def describe(self) -> str:
        """``gpu-policies with clusters/dev-values.yaml``: how messages name the set."""
        where = ", ".join(self.dirs)
        return f"{where} with {self.values}" if self.values else where


def policy_set_source(dirs, values: str | os.PathLike | None = None) -> PolicySetSource:
    """The set of the policy directories ``dirs`` with the values file ``values``; raises
    ReadError (what, where, how to fix) when the values file is not named as one. A values file
    that does not exist is the reader's error, when the set is read (serve then stays not ready
    until it appears, as with a policy directory)."""
    dirs = tuple(str(d) for d in dirs)
    if values is None or str(values) == "":
        return PolicySetSource(dirs)
    values = str(values)
    if not is_values_file(os.path.basename(values)):
        raise ReadError(f"{values}: a values file's name ends in {VALUES_SUFFIX} (dev-values.yaml, "
                        f"prod-values.yaml), which is how a file of a set is known as its values; rename it")
    return PolicySetSource(dirs, values)


def source_of_paths(paths, values: str | os.PathLike | None = None) -> PolicySetSource:
    """The set of ``paths`` with ``values``, or, without it, with the one values file named
    among ``paths`` (a fixture's set: its policy files, then its values file)."""
    paths = [str(p) for p in paths]
    if values is None:
        named = [p for p in paths if is_values_file(os.path.basename(p)) and os.path.isfile(p)]
        if len(named) == 1:
            values = named[0]
            paths.remove(values)
    return policy_set_source(paths, values)


def read_set(source: PolicySetSource) -> dict[str, str]:
    """{file name: text} of the set, read by the one reader serve uses; raises ReadError, or
    PolicyError (E407) when two of its paths hold a file of one name."""
    return read_sources(source.paths())


def load_set(source: PolicySetSource, probe=None):
    """The compiled PolicySet of ``source``; raises PolicyError (every problem) or ReadError.
    ``probe``: the fixture runner's expression coverage (``lang.probe``)."""
    return compile_sources(read_set(source), probe)
