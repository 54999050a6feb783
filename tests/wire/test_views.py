"""Views expose exactly the schema's fields, with the promised value types."""

import pytest

from policy_extender import schema
from policy_extender.wire.decode import decode_job, decode_predicate, decode_queue
from policy_extender.wire.views import VIEW_TYPES

from tests.support.bodies import sample


def _public(cls):
    return {n for c in cls.__mro__ for n in vars(c) if not n.startswith("_") and isinstance(vars(c)[n], property)} | \
        {n for c in cls.__mro__ for n in getattr(c, "__slots__", ()) if not n.startswith("_")}


@pytest.mark.parametrize("type_name", sorted(schema.TYPES))
def test_view_attributes_are_the_schema_fields(type_name):
    exposed = _public(VIEW_TYPES[type_name]) - {"raw", "env"}
    assert exposed == set(schema.TYPES[type_name]), type_name


def _views(full):
    request = decode_predicate(sample("predicate"), full)
    return {"task": request.task, "node": request.node,
            "job": decode_job(sample("jobReady"), full).job,
            "queue": decode_queue(sample("queueOverused"), full).queue}


NEVER_NULL = {"number": (int, float), "bool": bool}


def test_field_values_have_their_schema_types(full):
    from policy_extender.wire.resources import Resources
    for type_name, view in _views(full).items():
        for name, f in schema.TYPES[type_name].items():
            value = getattr(view, name)
            if f.type in NEVER_NULL:
                assert isinstance(value, NEVER_NULL[f.type]) and not (f.type == "number" and isinstance(value, bool)), (type_name, name)
            elif f.type.startswith("map["):
                assert isinstance(value, dict), (type_name, name)
            elif f.type.startswith("list["):
                assert isinstance(value, list), (type_name, name)
            elif f.type == "resources":
                assert isinstance(value, Resources), (type_name, name)
            elif f.type == "string":
                assert value is None or isinstance(value, str), (type_name, name)


def test_views_convert_lazily_and_share_the_raw_struct(full):
    node = decode_predicate(sample("predicate"), full).node
    assert node.idle is not node.idle              # computed on access, nothing stored
    assert not hasattr(node, "__dict__")          # __slots__ only
    other = node.with_env(object())
    assert other.raw is node.raw


def test_a_field_path_reads_what_digging_step_by_step_reads():
    """A view field (one attribute path, ``_dig`` on AttributeError) against ``_dig`` on Structs,
    dicts, None, absent and wrongly typed steps, for each kind of field (as it is, a map, a
    number, a flag); a step named like a method is refused."""
    import msgspec

    from policy_extender.wire.views import View, _dig, _flag, _mapping, _number, _string

    class Meta(msgspec.Struct):
        labels: dict | None = None

    class Pruned(msgspec.Struct):  # the read set left ``metadata`` out
        Name: str | None = None

    class Obj(msgspec.Struct):
        metadata: object = None

    raws = [Obj(Meta({"a": "1"})), Obj(Meta(None)), Obj(None), Obj({"labels": {"b": "2"}}), Obj({"x": 1}),
            Obj("text"), Obj([1, 2]), Obj(7), Pruned("n"), {"metadata": {"labels": {"c": "3"}}},
            {"metadata": Meta({"d": "4"})}, {"metadata": None}, {}, None, "text", [], 3]
    expected = {_string: lambda v: v, _mapping: lambda v: v if isinstance(v, dict) else {},
                _number: lambda v: v or 0, _flag: bool}
    for keys in (("metadata", "labels"), ("metadata",), ("Name",)):
        for field, convert in expected.items():
            Probe = type("Probe", (View,), {"__slots__": (), "f": field(*keys)})
            for raw in raws:
                got, want = Probe(raw).f, convert(_dig(raw, *keys))
                assert got == want and type(got) is type(want), (field.__name__, keys, raw, got)
    assert type("Probe", (View,), {"__slots__": (), "f": _mapping("metadata", "labels")})(raws[0]).f == {"a": "1"}
    for method in ("items", "get", "upper", "count", "real"):
        for field in expected:
            with pytest.raises(ValueError, match="named like a method"):
                field("metadata", method)
