"""kube-scheduler's extender responses, exactly as its Go client decodes them
(``k8s.io/kube-scheduler/extender/v1``: the wrapper types have no json tags, so keys are Go names).

* filter: ``ExtenderFilterResult{Nodes *v1.NodeList, NodeNames *[]string, FailedNodes
  map[string]string, FailedAndUnresolvableNodes map[string]string, Error string}``. The kept nodes
  go back as ``{"metadata": {"name": N}}`` (kube-scheduler reads only their names, and must find
  each among the nodes it sent); both maps are ``{}``, never null; ``NodeNames`` is null (it is
  read only from a ``nodeCacheCapable`` extender).
* prioritize: ``HostPriorityList`` ``[{"Host": N, "Score": S}]``, S an int64 in 0..10, every
  node sent listed once.
* preempt: ``ExtenderPreemptionResult{NodeNameToMetaVictims map[string]*MetaVictims{Pods
  []*MetaPod{UID}, NumPDBViolations int64}}``; a node without victims is left out (kube-scheduler
  refuses a node with none).
* an error: ``{"Error": text}`` (the filter's own field; prioritize and preempt have none, and
  kube-scheduler reads no body of a non-200 answer).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from .encode import EncodeError

_ENCODER = msgspec.json.Encoder()

#: kube-scheduler's ``MaxExtenderPriority``: the highest score an extender may give
MAX_SCORE = 10


def _int(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise EncodeError(f"{what} must be an integer, got {value!r}")
    return value


def filter_result(kept: Iterable[str], failed: Mapping[str, str], unresolvable: Mapping[str, str],
                  error: str = "") -> bytes:
    """``ExtenderFilterResult``: the names of the nodes kept, the reasons of the others."""
    return _ENCODER.encode({"Nodes": {"metadata": {}, "items": [{"metadata": {"name": n}} for n in kept]},
                            "NodeNames": None, "FailedNodes": {str(k): str(v) for k, v in failed.items()},
                            "FailedAndUnresolvableNodes": {str(k): str(v) for k, v in unresolvable.items()},
                            "Error": str(error)})


def filter_error(message: str) -> bytes:
    """A filter kube-scheduler must fail: no node kept, ``Error`` set (it fails the pod's
    attempt with this text unless the extender is ``ignorable``)."""
    return filter_result((), {}, {}, message or "policy-extender failed")


def host_priorities(scores: Mapping[str, int]) -> bytes:
    """``HostPriorityList``: ``[{"Host": N, "Score": S}]`` in the order given, S in 0..MAX_SCORE."""
    out = []
    for name, score in scores.items():
        score = _int(score, f"score of node {name!r}")
        if not 0 <= score <= MAX_SCORE:
            raise EncodeError(f"score of node {name!r} is {score}; kube-scheduler takes 0..{MAX_SCORE}")
        out.append({"Host": str(name), "Score": score})
    return _ENCODER.encode(out)


def preemption_result(victims: Mapping[str, tuple[list[str], int]]) -> bytes:
    """``ExtenderPreemptionResult``: node -> (the victims' UIDs, NumPDBViolations); a node with
    no UID is left out."""
    out = {}
    for node, (uids, violations) in victims.items():
        if uids:
            out[str(node)] = {"Pods": [{"UID": str(uid)} for uid in uids],
                              "NumPDBViolations": _int(violations, f"NumPDBViolations of node {node!r}")}
    return _ENCODER.encode({"NodeNameToMetaVictims": out})


def error(message: str) -> bytes:
    """``{"Error": message}``: the body of a kube-scheduler call answered with an error status."""
    return _ENCODER.encode({"Error": str(message)})
