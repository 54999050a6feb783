"""The context schema is internally consistent: every type a field names exists."""

import re

import pytest

from policy_extender import schema

SCALARS = {"number", "string", "bool", "any"}


def _named_types(type_expr):
    inner = re.fullmatch(r"(?:list|map)\[(.+)\]", type_expr)
    return _named_types(inner.group(1)) if inner else [type_expr]


@pytest.mark.parametrize("owner,field", [(t, f) for t, fs in schema.TYPES.items() for f in fs.values()],
                         ids=lambda v: getattr(v, "name", v))
def test_field_types_exist(owner, field):
    for name in _named_types(field.type):
        assert name in SCALARS or name in schema.TYPES, f"{owner}.{field.name}: unknown type {name}"


@pytest.mark.parametrize("kind,roots", schema.DECISION_ROOTS.items())
def test_decision_roots_name_object_types(kind, roots):
    assert all(t in schema.TYPES for t in roots.values())


def test_resource_shorthands_are_fields_of_resources_and_counts():
    for name in schema.RESOURCE_SHORTHANDS:
        assert schema.field("resources", name) is not None
        assert schema.field("counts", name) is not None
