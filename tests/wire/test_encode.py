"""Encoded responses decode strictly into structs typed like Volcano's Go response structs."""

import json
import math
from dataclasses import dataclass, field

import msgspec
import pytest

from policy_extender.wire import encode
from policy_extender.wire.decode import decode_victims
from policy_extender.wire.encode import EncodeError

from tests.support.bodies import sample


# Go's extender/argument.go response structs, field for field (json tags as keys).
class PredicateResponse(msgspec.Struct, forbid_unknown_fields=True):
    status: str
    code: int


class PrioritizeResponse(msgspec.Struct, forbid_unknown_fields=True):
    nodeScore: dict[str, float]      # not Optional: null would be an error in Volcano
    errorMessage: str


class VictimsResponse(msgspec.Struct, forbid_unknown_fields=True):
    status: int
    victims: list[dict]


class StatusIntResponse(msgspec.Struct, forbid_unknown_fields=True):
    status: int


class OverusedResponse(msgspec.Struct, forbid_unknown_fields=True):
    overused: bool


class StatusBoolResponse(msgspec.Struct, forbid_unknown_fields=True):
    status: bool


class EventResponse(msgspec.Struct, forbid_unknown_fields=True):
    errorMessage: str


def strict(data: bytes, type_):
    return msgspec.json.decode(data, type=type_, strict=True)


@dataclass
class Filter:
    fits: bool
    code: int = 0
    reason: str = ""
    rule: str = ""


@dataclass
class Victims:
    status: int
    victims: list = field(default_factory=list)


@dataclass
class Status:
    status: int


@dataclass
class Flag:
    value: bool


def test_predicate_fits_is_empty_status_code_zero():
    assert strict(encode.predicate(Filter(True)), PredicateResponse) == PredicateResponse("", 0)


def test_predicate_reject_keeps_reason_and_code():
    out = strict(encode.predicate(Filter(False, 3, "zone mismatch")), PredicateResponse)
    assert out == PredicateResponse("zone mismatch", 3)


def test_predicate_reject_never_has_empty_status_or_code_zero():
    out = strict(encode.predicate(Filter(False, 0, "", "zone")), PredicateResponse)
    assert out.status and out.code == 1


def test_prioritize_scores_are_floats_and_every_node_is_scored():
    out = strict(encode.prioritize(type("D", (), {"scores": {"a": 3, "b": 1.5}})(), ["a", "b", "c"]),
                 PrioritizeResponse)
    assert out.nodeScore == {"a": 3.0, "b": 1.5, "c": 0.0} and out.errorMessage == ""
    assert all(isinstance(v, float) for v in json.loads(encode.prioritize({"a": 3}))["nodeScore"].values())


def test_prioritize_with_no_scores_is_empty_object_not_null():
    assert encode.prioritize({}) == b'{"nodeScore":{},"errorMessage":""}'


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, "1", True])
def test_prioritize_refuses_non_finite_or_non_numbers(bad):
    with pytest.raises(EncodeError, match="node 'a'"):
        encode.prioritize({"a": bad})


def test_victims_are_the_sent_evictees_byte_for_byte(full):
    body = sample("preemptable")
    request = decode_victims(body, full)
    out = encode.victims(Victims(1, [0]), request.raw_evictees)
    decoded = strict(out, VictimsResponse)
    assert decoded.status == 1 and decoded.victims == [json.loads(body)["evictees"][0]]
    assert bytes(request.raw_evictees[0]) in out
    assert encode.victims(Victims(1, [0]), request) == out       # the request object also works


def test_no_victims_is_an_empty_list_not_null():
    assert json.loads(encode.victims(Victims(0, []), [])) == {"status": 0, "victims": []}


def test_victim_index_out_of_range_is_refused():
    with pytest.raises(EncodeError, match="out of range"):
        encode.victims(Victims(1, [2]), [msgspec.Raw(b"{}")])


@pytest.mark.parametrize("status", [1, 0, -1])
def test_enqueueable_status_is_an_int(status):
    assert strict(encode.enqueueable(Status(status)), StatusIntResponse).status == status
    assert strict(encode.enqueueable(status), StatusIntResponse).status == status


@pytest.mark.parametrize("bad", [2, True, "1", None])
def test_enqueueable_refuses_anything_but_permit_abstain_reject(bad):
    with pytest.raises(EncodeError):
        encode.enqueueable(Status(bad))


def test_overused_and_ready_are_bools():
    assert strict(encode.overused(Flag(1)), OverusedResponse).overused is True
    assert strict(encode.ready(Flag(False)), StatusBoolResponse).status is False
    assert encode.ready(True) == b'{"status":true}'


def test_events_and_empty_bodies():
    assert strict(encode.event(), EventResponse).errorMessage == ""
    assert encode.empty() == b"{}"


def test_strict_go_types_catch_a_bool_where_an_int_belongs():
    """The checks above would fail if an encoder wrote true for a code (Go: decode error)."""
    with pytest.raises(msgspec.ValidationError):
        strict(b'{"status": "", "code": true}', PredicateResponse)
