"""The values file of a policy set (``values.yaml``): per-cluster values of the ``param`` s its
policy files declare, read with ``yaml.SafeLoader`` keeping every key's and value's position.

Keys name a policy file (its name without ``.policy``) and a parameter of it, joined by dots;
a parameter of type ``map[number]`` takes one more part, the map's key, which may itself hold
dots and slashes. Nested mappings are joined the same way, so these three set one value::

    binpack.resources.nvidia.com/gpu: 2

    binpack:
      resources.nvidia.com/gpu: 2

    binpack:
      resources:
        nvidia.com/gpu: 2

Which parameter a key sets is the checker's business (it knows the declarations); this module
only reads the file into ``Setting`` s.
"""

from __future__ import annotations

from typing import NamedTuple

import yaml

from policy_extender.errors import Diagnostic, PolicyError, Span
from policy_extender.lang import codes

#: A file of the set whose name ends so (``values.yaml``, ``prod-values.yaml``) is a values file.
VALUES_SUFFIX = "values.yaml"


def is_values_file(name: str) -> bool:
    """Whether ``name`` (a file of a policy set) is a values file, not a policy file."""
    return name.endswith(VALUES_SUFFIX)


class Setting(NamedTuple):
    key: str          # the dotted key, nested mappings joined: ``binpack.resources.nvidia.com/gpu``
    value: object     # as YAML's safe loader reads it
    key_span: Span
    value_span: Span


def read_values(name: str, text: str) -> list[Setting]:
    """The settings of one values file, in order; raises PolicyError (E001) when it is not a
    YAML mapping of keys to scalars, or sets one key twice."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        problem = getattr(err, "problem", None) or str(err)
        raise _error(name, text, f"not YAML: {problem}", Span(name, line, column, line, column + 1),
                     "indent nested keys with spaces; write `policy.param: value` one per line") from None
    if root is None:
        return []
    if not isinstance(root, yaml.MappingNode):
        raise _error(name, text, "a values file is a mapping of parameter keys to values",
                     _span(name, root), "write `binpack.gpu_weight: 2`, one per line")
    settings: list[Setting] = []
    _flatten(name, text, root, "", settings)
    seen: dict[str, Setting] = {}
    for setting in settings:
        if setting.key in seen:
            first = seen[setting.key].key_span
            raise _error(name, text, f"'{setting.key}' is set twice (first at line {first.line})",
                         setting.key_span, "keep one of them")
        seen[setting.key] = setting
    return settings


def _flatten(name: str, text: str, node: yaml.MappingNode, prefix: str, out: list[Setting]) -> None:
    constructor = yaml.SafeLoader("")
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            raise _error(name, text, "a key of a values file is a name", _span(name, key_node),
                         "write `binpack.gpu_weight: 2`")
        key = prefix + str(key_node.value)
        if isinstance(value_node, yaml.MappingNode):
            _flatten(name, text, value_node, key + ".", out)
        elif isinstance(value_node, yaml.ScalarNode):
            value = constructor.construct_object(value_node, deep=True)
            out.append(Setting(key, value, _span(name, key_node), _span(name, value_node)))
        else:
            raise _error(name, text, f"'{key}' is set to a list: a parameter is a number, string, bool or map",
                         _span(name, value_node), "write one value, or a mapping for a map[number] parameter")


def _span(name: str, node: yaml.Node) -> Span:
    start, end = node.start_mark, node.end_mark
    if end.line != start.line:
        return Span(name, start.line + 1, start.column + 1, start.line + 1, start.column + 2)
    return Span(name, start.line + 1, start.column + 1, end.line + 1, max(end.column + 1, start.column + 2))


def _error(name: str, text: str, message: str, span: Span, hint: str) -> PolicyError:
    return PolicyError([Diagnostic(codes.E001, message, span, hint)], {name: text})
