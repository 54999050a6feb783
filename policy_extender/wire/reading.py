"""Reading JSON with msgspec: read-set keys, and msgspec errors turned into ``WireError`` with
the JSON path (``$.task.Resreq.MilliCPU: expected number, got string``)."""

from __future__ import annotations

import codecs
import re
import threading
from typing import Any, Mapping

import msgspec

from policy_extender.errors import WireError
from .structs import expected, struct_for

#: ``{"task"|"node"|"job"|"queue"|"cluster": frozenset of wire paths}``, as ``PolicySet.reads``
#: (``cluster``: paths in the onSessionOpen body, ``wire.paths.go_reads``; its ``placed`` key, the
#: task paths an allocate event's record keeps, is no root: no decoder is keyed on it).
Reads = Mapping[str, frozenset]
FrozenReads = tuple[tuple[str, frozenset], ...]

ROOTS = ("task", "node", "job", "queue", "cluster")


_FROZEN: dict[int, tuple[Reads | None, FrozenReads]] = {}


def freeze_reads(reads: Reads | None) -> FrozenReads:
    """A hashable, order-independent key for a read set (missing roots read nothing extra).

    A policy set's ``reads`` is one long-lived object, so the key is remembered by identity.
    """
    remembered = _FROZEN.get(id(reads))
    if remembered is not None and remembered[0] is reads:
        return remembered[1]
    frozen = tuple((root, frozenset(tuple(p) for p in (reads or {}).get(root, ()))) for root in ROOTS)
    if len(_FROZEN) >= 64:
        _FROZEN.clear()
    _FROZEN[id(reads)] = (reads, frozen)
    return frozen


#: Decoders are built by one thread at a time. msgspec fills a Struct type's decoding info on
#: first use and calls back into Python while doing it, so two gthread threads building decoders
#: over the same fresh types at once (a new worker's first 16 parallel predicates) is a race in C;
#: lookups after the first build take no lock.
_BUILD_LOCK = threading.RLock()
_MAX_CACHED = 64


def built_once(factory):
    """``factory(reads)`` built at most once per read set, under ``_BUILD_LOCK``; cached."""
    cache: dict = {}

    def get(frozen):
        found = cache.get(frozen)
        if found is None:
            with _BUILD_LOCK:
                found = cache.get(frozen)
                if found is None:
                    if len(cache) >= _MAX_CACHED:  # many reloads: drop the oldest read sets
                        cache.pop(next(iter(cache)))
                    found = cache[frozen] = factory(frozen)
        return found

    return get


def struct_of(frozen: FrozenReads, root: str) -> type:
    return struct_for(root, dict(frozen)[root])


# ---------------------------------------------------------------- errors

_MSGSPEC_ERROR = re.compile(r"^(?P<message>.*?)(?: - at `(?P<path>[^`]*)`)?$", re.S)
_TYPE_NAMES = {"int": "integer", "float": "number", "str": "string", "bool": "bool", "null": "null",
               "object": "object", "array": "array"}


def _friendly_type(name: str) -> str:
    names = [_TYPE_NAMES.get(part.strip(), part.strip()) for part in name.split("|")]
    return " or ".join(n for n in names if n != "null") or "null"


#: The onSessionOpen body's maps, required of it (``snapshot.open_body_decoder``).
_OPEN_MAPS = {"Jobs": "an object", "Nodes": "an object", "Queues": "an object"}

#: The Go struct (``structs.GO_KEYS``) of the object at a path ending in this key or index:
#: ``$.task``, ``$.evictees[0]``, ``$.Jobs[...].Tasks[...]``, ``$.nodes[0].Idle``, ...
_STRUCT_AT = {"task": "task", "evictor": "task", "evictees": "task", "Tasks": "task", "node": "node",
              "nodes": "node", "job": "job", "Jobs": "job", "queue": "queue", "Queues": "queue",
              "State": "NodeState", **{key: "Resource" for key in ("Resreq", "InitResreq", "Idle", "Used",
                                                                   "Releasing", "Pipelined", "Allocatable",
                                                                   "Capacity", "Allocated", "TotalRequest")}}


def _expected_at(path: str, key: str) -> str:
    """What the missing ``key`` of the object at ``path`` holds, in words."""
    if path == "$" and key in _OPEN_MAPS:
        return _OPEN_MAPS[key]
    last = re.findall(r"(\w+)(?:\[[^\]]*\])?$", path)
    return expected(_STRUCT_AT.get(last[0], "") if last else "", key) or "a value"


def _friendly(message: str) -> str:
    """msgspec's "Expected `float | null`, got `str`" as "expected number, got string"."""
    if "matching regex" in message and "Ki|Mi|Gi" in message:
        return "expected a Kubernetes quantity string such as \"2\", \"500m\" or \"4Gi\""
    if re.fullmatch(r"Expected `str` of length >= 1", message):
        return "expected a non-empty string, got an empty one (Volcano never sends it empty)"
    bounded = re.fullmatch(r"Expected `int` ([<>]=) (-?[0-9]+)", message)
    if bounded:  # wire.structs.Int32 / Int64: past what Go's type holds
        bits = 32 if abs(int(bounded.group(2))) <= 2**31 else 64
        return (f"expected an integer {bounded.group(1)} {bounded.group(2)} (a Go int{bits}: Volcano "
                "never sends one out of its range)")
    typed = re.fullmatch(r"Expected `([^`]*)`, got `([^`]*)`", message)
    if typed:
        return f"expected {_friendly_type(typed.group(1))}, got {_friendly_type(typed.group(2))}"
    return message[:1].lower() + message[1:]


def wire_error(error: msgspec.MsgspecError, prefix: str = "$") -> WireError:
    """A WireError from a msgspec error, its path re-rooted at ``prefix``."""
    if not isinstance(error, msgspec.ValidationError):
        return WireError(f"malformed JSON: {error}", prefix)
    match = _MSGSPEC_ERROR.match(str(error))
    assert match is not None  # the pattern matches any text
    path = prefix + (match["path"] or "$")[1:]
    missing = re.fullmatch(r"Object missing required field `([^`]*)`", match["message"])
    if missing:
        key = missing.group(1)
        return WireError(f"missing: expected {_expected_at(path, key)}; Volcano always sends this "
                         "field (is the body from Volcano's extender plugin, sent to the right verb path?)",
                         f"{path}.{key}")
    return WireError(_friendly(match["message"]), path)


#: What a decoder raises on a body it cannot read: msgspec's errors, and ``UnicodeDecodeError``
#: for invalid UTF-8 in a string it decodes (msgspec raises it as is, with no position).
DECODE_ERRORS = (msgspec.MsgspecError, UnicodeDecodeError)


def decode_json(decoder: msgspec.json.Decoder, body: bytes, prefix: str = "$") -> Any:
    if not body:
        raise WireError("empty body: expected a JSON object, as Volcano sends", prefix)
    try:
        return decoder.decode(body)
    except msgspec.MsgspecError as error:
        raise wire_error(error, prefix) from None
    except UnicodeDecodeError:
        raise utf8_error(body, prefix) from None


def utf8_error(body: Any, prefix: str = "$") -> WireError:
    """A 400 for invalid UTF-8 in a string the policies read, saying at which byte (found by
    decoding the body 1 MiB at a time: this is the error path only, and a mapped body may be
    hundreds of MB)."""
    step, at = 1 << 20, 0
    with memoryview(body) as view:
        while at < len(view):
            final = at + step >= len(view)
            try:
                with view[at:at + step] as part:
                    _, consumed = codecs.utf_8_decode(part, "strict", final)
            except UnicodeDecodeError as error:
                return WireError(f"malformed JSON: invalid UTF-8 at byte {at + error.start}; JSON text must be "
                                 "UTF-8, as Volcano sends it", prefix)
            at += consumed if consumed else step  # a piece stops before a character its end cut
    return WireError("malformed JSON: invalid UTF-8 in a string; JSON text must be UTF-8, as Volcano sends it", prefix)


def required(value, path: str):
    if value is None:
        raise WireError("missing: the body must carry this object (is the verb mapped to the right path?)", path)
    return value
