"""Security defaults: no unsafe YAML loading or code evaluation anywhere in the package, and the
documented defaults (loopback bind) hold."""

from __future__ import annotations

import re
from pathlib import Path

from policy_extender.config import Config

PACKAGE = Path(__file__).resolve().parents[2] / "policy_extender"
FORBIDDEN = re.compile(r"\byaml\.load\(|\beval\(|\bexec\(|\byaml\.unsafe_load|\bpickle\.loads?\(|"
                       r"__import__\(|\bcompile\([^)]*['\"]exec['\"]")


def test_the_package_never_loads_yaml_unsafely_or_evaluates_code():
    hits = [f"{path.relative_to(PACKAGE.parent)}:{n}: {line.strip()}"
            for path in sorted(PACKAGE.rglob("*.py"))
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if FORBIDDEN.search(line)]
    assert not hits, "\n".join(hits)


def test_the_grep_would_catch_each_forbidden_call():
    for line in ["yaml.load(text)", "x = eval(s)", "exec(code)", "pickle.loads(b)", "__import__('os')"]:
        assert FORBIDDEN.search(line), line


def test_the_service_binds_loopback_by_default():
    assert Config().bind == "127.0.0.1:8713"
