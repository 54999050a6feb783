"""Redaction: blank sensitive values of a request (or victims response) body before it is written.

Two kinds, chosen with ``--record-redact annotations,env``:

* ``annotations`` — every ``annotations`` map (pods, nodes, pod groups, queues) and TaskInfo's
  ``PodAnnotations``: keys kept, values blanked to ``""`` — except the annotation keys the policy
  set that answered reads by name (``task.annotations["scheduling.example.com/zone"]``), so a
  replay of the same policies decides the same.
* ``env`` — the ``value`` of every container's and init container's ``env`` entries (names and
  ``valueFrom`` references kept), and the ``kubectl.kubernetes.io/last-applied-configuration``
  annotation, which repeats the whole pod spec.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

import orjson

KINDS = ("annotations", "env")
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_ANNOTATION_MAPS = ("annotations", "PodAnnotations")
_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
_READ_BY_NAME = re.compile(r"""annotations\s*(?:\[\s*"((?:[^"\\]|\\.)*)"\s*\]|\.([A-Za-z_][\w-]*))""")


class RedactError(ValueError):
    """An unknown redaction kind."""


def parse_kinds(text: str | Iterable[str]) -> frozenset[str]:
    """``"annotations,env"`` (or a list) -> the kinds; unknown names raise RedactError."""
    names = [part.strip() for part in (text.split(",") if isinstance(text, str) else text)]
    kinds = frozenset(name for name in names if name)
    unknown = sorted(kinds - set(KINDS))
    if unknown:
        raise RedactError(f"unknown redaction {unknown[0]!r}: use {' and/or '.join(KINDS)}, "
                          "comma-separated")
    return kinds


def annotation_keys_read(sources: dict[str, str]) -> frozenset[str]:
    """Annotation keys the policy texts name (``annotations["k"]`` or ``annotations.k``)."""
    keys = set()
    for text in sources.values():
        for quoted, dotted in _READ_BY_NAME.findall(text):
            keys.add(quoted or dotted)
    return frozenset(keys)


def redact_body(body: bytes, kinds: frozenset[str], keep: frozenset[str] = frozenset()) -> bytes:
    """``body`` with the chosen values blanked; a body that is not JSON is returned unchanged
    (the service answered it 400, and it carries nothing decodable)."""
    if not kinds or not body:
        return body
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body
    _walk(document, kinds, keep)
    return orjson.dumps(document)


def _walk(value: Any, kinds: frozenset[str], keep: frozenset[str]) -> None:
    if isinstance(value, list):
        for item in value:
            _walk(item, kinds, keep)
        return
    if not isinstance(value, dict):
        return
    for key, item in value.items():
        if key in _ANNOTATION_MAPS and isinstance(item, dict):
            _blank_annotations(item, kinds, keep)
        elif key in _CONTAINER_LISTS and "env" in kinds and isinstance(item, list):
            _blank_env(item)
        _walk(item, kinds, keep)


def _blank_annotations(annotations: dict, kinds: frozenset[str], keep: frozenset[str]) -> None:
    for key in annotations:
        if key == LAST_APPLIED and "env" in kinds:
            annotations[key] = ""
        elif "annotations" in kinds and key not in keep:
            annotations[key] = ""


def _blank_env(containers: list) -> None:
    for container in containers:
        env = container.get("env") if isinstance(container, dict) else None
        for entry in env if isinstance(env, list) else ():
            if isinstance(entry, dict) and "value" in entry:
                entry["value"] = ""
