"""A policy set from sources or from directories: ``compile_sources({"zone.policy": text})``
(the language's ``lang.compile``, versioned by the one content hash) and ``load_directories``
(the one directory reader, ``files.read_snapshot``, as serve reads a ConfigMap volume)."""

from __future__ import annotations

from policy_extender import lang
from policy_extender.decide.policy_set import PolicySet
from policy_extender.errors import Diagnostic, PolicyError, Span
from policy_extender.lang import codes
from policy_extender.lang.values import VALUES_SUFFIX
from policy_extender.policyset.files import DuplicateFile, read_snapshot, version_of

#: The files of a policy directory that make its set: the policies, and the values of their
#: parameters (``values.yaml``: lang.values), so a changed value is a new version of the set.
SUFFIXES = (".policy", VALUES_SUFFIX)


def compile_sources(sources: dict[str, str], probe=None) -> PolicySet:
    """Compile policy files given as {file name: text}; raises PolicyError with every problem.
    ``probe`` (``lang.probe.Probe``): the fixture runner's expression coverage, never served."""
    return PolicySet(sources, lang.compile(sources, probe), version_of(sources))


def load_directories(paths) -> PolicySet:
    """Compile the ``*.policy`` files of the directories (or files) ``paths`` as one set, read
    the way serve reads them; raises PolicyError (E407: one file name twice) or ReadError."""
    return compile_sources(read_sources(paths))


def read_sources(paths) -> dict[str, str]:
    """{file name: text} of the policy files of ``paths`` (directories or files), read by the one
    reader serve uses: a ConfigMap volume's ``..data`` payload, hidden entries skipped."""
    try:
        return read_snapshot([str(p) for p in paths], SUFFIXES).sources()
    except DuplicateFile as twice:
        raise PolicyError([Diagnostic(codes.E407, f"{twice.name} is in both {twice.first} and {twice.second}",
                                      Span(twice.name, 1, 1, 1, 1), "rename one of them")]) from None
