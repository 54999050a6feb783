"""The modules a verb call runs through (the dispatch, the session cache and its head watch, the
session env, request ids and logging) read no private attribute of another library's objects:
a library's private attribute (such as ``logging.Logger._cache``, which the dispatch once read
as a shortcut for ``isEnabledFor``) may change in any release without notice."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import policy_extender

PACKAGE = Path(policy_extender.__file__).parent
ON_THE_PATH = ("web/dispatch.py", "session/cache.py", "session/head_watch.py", "session/env.py", "logs.py")
#: a NamedTuple's public API is spelt with an underscore
NAMED_TUPLE_API = {"_replace", "_fields", "_asdict", "_make"}


def private_reads(source: str) -> list[str]:
    """``x._name`` on anything but ``self`` or ``cls``, and ``getattr(x, "_name")`` and the like."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and node.attr not in NAMED_TUPLE_API
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant) and str(node.args[1].value).startswith("_")):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("module", ON_THE_PATH)
def test_no_private_attribute_of_another_object_is_read(module):
    assert private_reads((PACKAGE / module).read_text()) == []


def test_the_check_finds_what_it_looks_for():
    assert private_reads('levels = getattr(request_log, "_cache", None)\n') == [
        "line 1: getattr(request_log, '_cache', None)"]
    assert private_reads("total = child._sum\nself._mine = head._replace(seq=0)\n") == ["line 1: child._sum"]
