"""The VS Code extension (``editors/vscode``): its TextMate grammar run by VS Code's own engine
(vscode-textmate with Oniguruma, from npm) over every shipped policy file and a file holding every
token class; its word lists read from the code they mirror; and the .vsix that
``scripts/build-vsix`` packages with vsce."""

from __future__ import annotations

import json
import re
import subprocess
import zipfile
from pathlib import Path

import pytest

from policy_extender import schema
from policy_extender.lang import ast
from policy_extender.lang.builtins import BUILTINS
from policy_extender.lang.checker import ALL_ROOTS, MODIFIER_KINDS

ROOT = Path(__file__).resolve().parents[2]
EXTENSION = ROOT / "editors" / "vscode"
GRAMMAR = json.loads((EXTENSION / "syntaxes" / "policy.tmLanguage.json").read_text())
EVERY_TOKEN = ROOT / "tests" / "lsp" / "grammar" / "every-token.policy"
GOLDEN = sorted((ROOT / "policies").rglob("*.policy")) + [EVERY_TOKEN]


def names_in(node) -> set[str]:
    """Every scope name the grammar gives."""
    found: set[str] = set()
    if isinstance(node, dict):
        found |= {v for k, v in node.items() if k == "name" and isinstance(v, str)}
        for value in node.values():
            found |= names_in(value)
    elif isinstance(node, list):
        for value in node:
            found |= names_in(value)
    return found - {GRAMMAR["name"]}


def alternatives(rule: str, pattern_part: str) -> set[str]:
    """The words of the first ``(a|b|c)`` group that ``pattern_part`` starts in a grammar rule."""
    patterns = json.dumps(GRAMMAR["repository"][rule])
    found = re.search(re.escape(pattern_part) + r"\(([a-z_|]+)\)", patterns.replace("\\\\", "\\"))
    assert found, (rule, pattern_part)
    return set(found.group(1).split("|"))


@pytest.fixture(scope="module")
def tokens() -> dict[str, list]:
    subprocess.run(["bash", str(ROOT / "scripts" / "build-vsix"), "--deps-only"], check=True, timeout=600)
    done = subprocess.run(["node", str(EXTENSION / "test" / "tokens.js"), *map(str, GOLDEN)],
                          capture_output=True, text=True, check=True, timeout=120, cwd=EXTENSION)
    return json.loads(done.stdout)


@pytest.mark.slow
def test_every_token_class_of_the_grammar_occurs_in_the_golden_files(tokens):
    seen = {scope for file in tokens.values() for _, _, scopes in file for scope in scopes}
    assert names_in(GRAMMAR) - seen == set()


@pytest.mark.slow
def test_every_word_outside_comments_and_strings_is_classified(tokens):
    bare = [(Path(f).name, line, text) for f, file in tokens.items() for line, text, scopes in file
            if scopes == ["source.policy"] and re.search(r"[A-Za-z0-9]", text)]
    assert bare == []


EXPECTED = [  # (text, a scope of its token) in every-token.policy
    ("protocol", "keyword.other.protocol.policy"),
    ("param", "storage.type.param.policy"), ("gpu_weight", "variable.other.definition.policy"),
    ("number", "support.type.policy"),
    ("shared", "storage.modifier.shared.policy"), ("let", "storage.type.let.policy"),
    ("victim", "keyword.control.rule.policy"), ("keep-short", "entity.name.function.rule.policy"),
    ("max", "support.function.builtin.policy"), ("evictee", "variable.language.root.policy"),
    ("priority", "variable.other.property.policy"), ("if none abstain", "keyword.other.modifier.policy"),
    ("keep", "string.quoted.double.policy"), ("null", "constant.language.policy"), ("none", "string.quoted.single.policy"), ("??", "keyword.operator.policy"),
    ("when", "keyword.control.file.policy"), ("not", "keyword.operator.word.policy"),
    ("reason", "keyword.other.modifier.policy"), ("{", "punctuation.section.embedded.begin.policy"),
    ("2Gi", "constant.numeric.policy"), ("1.5", "constant.numeric.policy"),
    ("then", "keyword.control.expression.policy"), ("to", "keyword.control.expression.policy"),
    ("# Every token class", "comment.line.number-sign.policy"),
]


@pytest.mark.slow
@pytest.mark.parametrize("text, scope", EXPECTED)
def test_tokens_of_every_token_policy(tokens, text, scope):
    found = [scopes for _, token, scopes in tokens[str(EVERY_TOKEN)] if token.startswith(text)]
    assert found, f"no token {text!r}"
    assert any(scope in scopes for scopes in found), found


def test_the_grammar_lists_what_the_language_has():
    assert alternatives("rule", "^") == set(schema.DECISION_ROOTS)
    assert alternatives("expression", "\\b") >= {"true", "false", "null"}
    builtins = next(p["match"] for p in GRAMMAR["repository"]["expression"]["patterns"]
                    if p.get("name") == "support.function.builtin.policy")
    assert set(re.search(r"\(([a-z_|]+)\)", builtins).group(1).split("|")) == set(BUILTINS) | set(ast.AGGREGATES)
    roots = next(p["match"] for p in GRAMMAR["repository"]["expression"]["patterns"]
                 if p.get("name") == "variable.language.root.policy")
    assert set(re.search(r"\(([a-z_|]+)\)", roots).group(1).split("|")) == set(ALL_ROOTS)
    shorthands = next(p["match"] for p in GRAMMAR["repository"]["expression"]["patterns"]
                      if p.get("name") == "variable.language.shorthand.policy")
    assert set(re.search(r"\(([a-z_|]+)\)", shorthands).group(1).split("|")) == set(schema.SHORTHANDS)
    modifiers = GRAMMAR["repository"]["modifier"]["match"]
    assert {m for m in MODIFIER_KINDS if m != "if none"} <= set(re.findall(r"[a-z]+", modifiers))


@pytest.mark.slow
def test_the_vsix_holds_the_grammar_the_client_and_its_language_client():
    built = subprocess.run(["bash", str(ROOT / "scripts" / "build-vsix")], capture_output=True, text=True,
                           check=True, timeout=600)
    vsix = Path(built.stdout.strip())
    assert vsix.name == "policy-extender-0.1.0.vsix" and vsix.is_file()
    with zipfile.ZipFile(vsix) as archive:
        names = set(archive.namelist())
        manifest = json.loads(archive.read("extension/package.json"))
        grammar = json.loads(archive.read("extension/syntaxes/policy.tmLanguage.json"))
        vsixmanifest = archive.read("extension.vsixmanifest").decode()
    assert grammar == GRAMMAR
    [language] = manifest["contributes"]["languages"]
    [syntax] = manifest["contributes"]["grammars"]
    assert language["extensions"] == [".policy"] and syntax["scopeName"] == "source.policy"
    assert {f"extension/{syntax['path'][2:]}", f"extension/{language['configuration'][2:]}",
            f"extension/{manifest['main'][2:]}", "extension/node_modules/vscode-languageclient/node.js"} <= names
    assert not any("/vscode-textmate/" in n or "/@vscode/vsce/" in n for n in names)
    assert 'Id="policy-extender"' in vsixmanifest and "Microsoft.VisualStudio.Code" in vsixmanifest
    assert manifest["contributes"]["configuration"]["properties"]["policyExtender.command"]["default"] == \
        ["policy-extender", "lsp"]
