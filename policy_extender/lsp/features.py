"""What the editor asks of a set, answered from the checker's analysis and the schema: plain
functions of a ``SetView`` (``documents``), in the checker's terms (1-based line and column,
``Span``), so they are tested in-process; ``server`` turns them into the protocol's types.

Hover, definition and references read what the checker recorded (``Checker.names``: which let,
param, root or shorthand a name is; ``Checker.types``: each expression's type), never a second
resolution; completion reads the line being typed (a half-written line does not parse) against
``schema`` and the set's lets and params."""

from __future__ import annotations

import re
from dataclasses import dataclass

from policy_extender import schema
from policy_extender.errors import Diagnostic, PolicyError, Span
from policy_extender.lang import ast
from policy_extender.lang.builtins import BUILTINS
from policy_extender.lang.checker import ALL_ROOTS, MODIFIER_KINDS
from policy_extender.lang.formatter import format_source
from policy_extender.lang.values import is_values_file
from policy_extender.lsp.documents import SetView
from policy_extender.lsp.locate import line_of, name_span, node_at, spans_equal_text, statement_at

STATEMENT_WORDS = (*schema.DECISION_ROOTS, "let", "shared let", "param", "when", "protocol", "audit")
EXPRESSION_WORDS = ("and", "or", "not", "in", "if", "then", "else", "for", "true", "false", "null")
AGGREGATES = ast.AGGREGATES


@dataclass(frozen=True)
class Item:
    """A completion: the text, what it is (field, root, let, param, builtin, keyword...) and a line
    about it."""
    label: str
    kind: str
    detail: str
    doc: str = ""


# --- hover ---------------------------------------------------------------------------------------

def hover(view: SetView, file: str, line: int, column: int) -> str | None:
    """Markdown about what is under (line, column): a field, a root, a let or param, a shorthand,
    a builtin, an aggregate's variable; None over anything else."""
    parsed = _file(view, file)
    if parsed is None:
        return None
    defined = _defined_at(view, parsed, line, column)
    if defined is not None:
        return _let_hover(view, defined)
    node = node_at(parsed, line, column)
    if isinstance(node, ast.FieldAccess):
        return _field_hover(view, node)
    if isinstance(node, ast.Call):
        builtin = BUILTINS.get(node.func)
        return f"```\n{builtin.signature()}\n```\n{builtin.doc}" if builtin else None
    if isinstance(node, ast.Name):
        return _name_hover(view, node, parsed)
    return None


def _field_hover(view: SetView, node: ast.FieldAccess) -> str | None:
    owner = view.analysis.checker.types.get(id(node.obj))
    found = schema.field(owner, node.name) if owner else None
    if owner is None or found is None:
        return None
    unit = f" ({found.unit})" if found.unit else ""
    source = "the session snapshot (onSessionOpen) and this cycle's events" if found.session else "the request body"
    kinds = [k for k, roots in schema.DECISION_ROOTS.items()
             if _reaches([t for r, t in roots.items() if r not in _EVERYWHERE], owner)]
    verbs = "; ".join(f"{protocol}: {', '.join(found_verbs)}" for protocol in schema.PROTOCOL_FIELDS
                      if schema.sends(protocol, owner, found.name)
                      for found_verbs in [_verbs(protocol, kinds)] if found_verbs)
    return (f"```\n{owner}.{found.name}: {found.type}\n```\n{found.doc}{unit}\n\n"
            f"read from {source}; the verbs whose rules read it directly: {verbs or 'none'} "
            f"(every rule kind reaches it through `cluster`)")


#: Roots every rule kind has, through which everything is reachable: left out of "which verbs".
_EVERYWHERE = ("cluster", "session")


def _verbs(protocol: str, kinds: list[str]) -> list[str]:
    """The verbs of ``protocol`` that rules of these kinds decide (decide.table, kube_table)."""
    from policy_extender.decide import kube_table, table
    verbs = table.VERBS if protocol == "volcano" else kube_table.KUBE_VERBS
    return [name for name, verb in verbs.items() if any(k in verb.rule_kinds for k in kinds)]


def _reaches(root_types, owner: str) -> bool:
    """Whether an object of type ``owner`` can be reached from roots of these types."""
    seen, todo = set(), list(root_types)
    while todo:
        current = _element(todo.pop())
        if current == owner:
            return True
        if current in seen or current not in schema.TYPES:
            continue
        seen.add(current)
        todo += [f.type for f in schema.TYPES[current].values()]
    return False


def _element(type_name: str) -> str:
    match = re.fullmatch(r"(?:list|map)\[(.+)\]", type_name)
    return _element(match.group(1)) if match else type_name


def _name_hover(view: SetView, node: ast.Name, parsed: ast.PolicyFile) -> str | None:
    meaning = view.analysis.checker.names.get(id(node))
    typed = view.analysis.checker.types.get(id(node), "any")
    if meaning is None:
        return None
    if meaning[0] == "let":
        return _let_hover(view, meaning[1])
    if meaning[0] == "root":
        kinds = ", ".join(k for k, roots in schema.DECISION_ROOTS.items() if node.name in roots)
        return f"```\n{node.name}: {typed}\n```\ncontext root; readable in rule kinds: {kinds}"
    if meaning[0] == "short":
        text, doc = schema.SHORTHANDS[node.name]
        return f"```\n{node.name} = {text}: {typed}\n```\nshorthand: {doc}"
    if meaning[0] == "var":
        return f"```\n{node.name}: {typed}\n```\nthe variable of an aggregate (`for {node.name} in ...`)"
    return None


def _let_hover(view: SetView, let: ast.Let) -> str:
    param = _param_of(view, let)
    typed = view.analysis.checker.types.get(id(let.expr), "any") if let.expr is not None else "any"
    if param is not None:
        setting = _setting_of(view, param)
        value = (f"set to `{setting.value!r}` by {setting.key_span.file} line {setting.key_span.line}"
                 if setting else "no values file sets it: the default")
        return (f"```\nparam {param.name}: {param.type} = {_show(param.default)}\n```\n"
                f"parameter of {param.span.file}; {value}")
    source = view.sources.get(let.span.file, "")
    text = " ".join(line_of(source, n - 1).strip() for n in range(let.span.line, let.span.end_line + 1))
    where = "shared by every file of the set" if let.shared else f"defined in {let.span.file} line {let.span.line}"
    return f"```\n{text}\n```\n`{let.name}`: {typed}, {where}"


def _show(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, str) else str(value)


# --- definition and references -------------------------------------------------------------------

def definition(view: SetView, file: str, line: int, column: int) -> list[Span]:
    """Where the let, shared let or param under the cursor is defined (a param: its declaration
    and the values file's key that sets it)."""
    let = _let_under(view, file, line, column)
    if let is None:
        return []
    return _declarations(view, let)


def references(view: SetView, file: str, line: int, column: int, declaration: bool = True) -> list[Span]:
    """Every use of the let, shared let or param under the cursor, in every file of the set."""
    let = _let_under(view, file, line, column)
    if let is None:
        return []
    names = view.analysis.checker.names
    uses = [node.span for parsed in view.analysis.files for statement in parsed.statements
            for node in _names_of(statement) if names.get(id(node), (None, None))[1] is let]
    return (_declarations(view, let) if declaration else []) + sorted(uses, key=_order)


def _declarations(view: SetView, let: ast.Let) -> list[Span]:
    param = _param_of(view, let)
    if param is not None:
        setting = _setting_of(view, param)
        return [param.name_span] + ([setting.key_span] if setting else [])
    where = name_span(let, view.sources.get(let.span.file, ""))
    return [where] if where else [let.span]


def _let_under(view: SetView, file: str, line: int, column: int) -> ast.Let | None:
    parsed = _file(view, file)
    if parsed is None:
        return None
    defined = _defined_at(view, parsed, line, column)
    if defined is not None:
        return defined
    node = node_at(parsed, line, column)
    meaning = view.analysis.checker.names.get(id(node)) if isinstance(node, ast.Name) else None
    return meaning[1] if meaning and meaning[0] == "let" else None


def _defined_at(view: SetView, parsed: ast.PolicyFile, line: int, column: int) -> ast.Let | None:
    """The let whose name is written at (line, column) in its definition (a param: its let)."""
    statement = statement_at(parsed, line)
    where = name_span(statement, parsed.source) if statement is not None else None
    if where is None or not (where.line == line and where.column <= column <= where.end_column):
        return None
    if isinstance(statement, ast.Param):
        return view.analysis.checker.params.get(parsed.name, {}).get(statement.name)
    return statement


def _param_of(view: SetView, let: ast.Let) -> ast.Param | None:
    if id(let) not in view.analysis.checker.param_lets:
        return None
    parsed = _file(view, let.span.file)
    statements = parsed.statements if parsed else ()
    return next((s for s in statements if isinstance(s, ast.Param) and s.name == let.name), None)


def _setting_of(view: SetView, param: ast.Param):
    stem = param.span.file.removesuffix(".policy")
    key = f"{stem}.{param.name}"
    return next((s for s in view.analysis.settings if s.key == key or s.key.startswith(key + ".")), None)


def _names_of(statement) -> list[ast.Name]:
    from policy_extender.lsp.locate import expressions
    return [node for node in expressions(statement) if isinstance(node, ast.Name)]


def _order(span: Span) -> tuple:
    return span.file, span.line, span.column


def _file(view: SetView, name: str) -> ast.PolicyFile | None:
    return next((f for f in view.analysis.files if f.name == name), None)


# --- completion ----------------------------------------------------------------------------------

_CHAIN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*|\[[^\[\]]*\])*)\.([A-Za-z_][A-Za-z0-9_]*)?$")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")


def completions(view: SetView, file: str, text: str, line: int, column: int) -> list[Item]:
    """What may be written at (line, column) of ``text`` (the file as typed): after ``x.``, the
    fields of x's type that the file's schedulers send; at a statement's start, statement words;
    at a modifier's, the modifiers of the rule's kind; elsewhere the names the rule kind can read,
    lets, params, builtins and the expression keywords."""
    before = line_of(text, line - 1)[:column - 1]
    kind = _kind_at(text, line)
    chain = _CHAIN.search(before)
    if chain:
        return _fields_after(view, file, text, chain.group(1), kind)
    stripped = _WORD.sub("", before)
    if not stripped.strip():
        if not stripped:
            return [Item(w, "keyword", "statement") for w in STATEMENT_WORDS]
        if kind is not None:
            return [Item(m, "keyword", f"modifier of a {kind} rule") for m in MODIFIER_KINDS if kind in MODIFIER_KINDS[m]]
    return _names_for(view, file, kind)


def _kind_at(text: str, line: int) -> str | None:
    """The rule kind of the statement that holds ``line``: the first word of the nearest line above
    that starts at column 1 (None: a let, guard or param, which may read any root)."""
    for number in range(line - 1, -1, -1):
        current = line_of(text, number)
        if current[:1] and not current[:1].isspace() and not current.startswith("#"):
            word = current.split()[0].rstrip(":")
            return word if word in schema.DECISION_ROOTS else None
    return None


def _protocols(text: str) -> frozenset[str]:
    found = re.search(r"^protocol[ \t]+([^\n#]+)", text, re.M)
    names = {n.strip() for n in found.group(1).split(",")} if found else set()
    return frozenset(n for n in names if n in schema.PROTOCOL_FIELDS) or schema.DEFAULT_PROTOCOLS


def _fields_after(view: SetView, file: str, text: str, chain: str, kind: str | None) -> list[Item]:
    owner = _type_of_chain(view, file, chain, kind)
    if owner not in schema.TYPES:
        return []
    protocols = _protocols(text)
    return [Item(f.name, "field", f.type, f"{f.doc}{f' ({f.unit})' if f.unit else ''}")
            for f in schema.TYPES[owner].values() if all(schema.sends(p, owner, f.name) for p in protocols)]


def _type_of_chain(view: SetView, file: str, chain: str, kind: str | None) -> str | None:
    steps = re.findall(r"\[[^\[\]]*\]|[A-Za-z_][A-Za-z0-9_]*", chain)
    roots = schema.DECISION_ROOTS[kind] if kind else ALL_ROOTS
    first = steps[0]
    current = roots.get(first) or _let_type(view, file, first)
    for step in steps[1:]:
        if current is None:
            return None
        if step.startswith("["):
            inner = re.fullmatch(r"(?:map|list)\[(.+)\]", current)
            current = inner.group(1) if inner else schema.INDEX_TYPES.get(current)
        else:
            found = schema.field(current, step)
            current = found.type if found else None
    return current


def _let_type(view: SetView, file: str, name: str) -> str | None:
    let = _lets_visible(view, file).get(name)
    return view.analysis.checker.types.get(id(let.expr)) if let is not None and let.expr is not None else None


def _lets_visible(view: SetView, file: str) -> dict[str, ast.Let]:
    parsed = _file(view, file)
    lets = {s.name: s for f in view.analysis.files for s in f.statements if isinstance(s, ast.Let) and s.shared}
    if parsed is not None:
        lets.update({s.name: s for s in parsed.statements if isinstance(s, ast.Let)})
        lets.update(view.analysis.checker.params.get(file, {}))
    return lets


def _names_for(view: SetView, file: str, kind: str | None) -> list[Item]:
    roots = schema.DECISION_ROOTS[kind] if kind else ALL_ROOTS
    items = [Item(name, "root", type_name, f"context root of a {kind or 'let or guard'}")
             for name, type_name in roots.items()]
    items += [Item(name, "shorthand", text, doc) for name, (text, doc) in schema.SHORTHANDS.items()
              if kind is None or all(root in roots for root in re.findall(r"^[a-z_]+", text))]
    for name, let in _lets_visible(view, file).items():
        what = "param" if id(let) in view.analysis.checker.param_lets else ("shared let" if let.shared else "let")
        items.append(Item(name, what, _let_type(view, file, name) or "any", f"{what} of {let.span.file}"))
    items += [Item(name, "builtin", b.signature(), b.doc) for name, b in BUILTINS.items()]
    items += [Item(name, "builtin", f"{name}(x for x in list [if cond])", "aggregate") for name in AGGREGATES
              if name not in BUILTINS]
    items += [Item(word, "keyword", "expression") for word in EXPRESSION_WORDS]
    return items


# --- formatting and quick fixes ------------------------------------------------------------------

def formatted(name: str, text: str) -> str | None:
    """The file in ``fmt``'s layout; None when it does not parse (its diagnostics say why)."""
    if is_values_file(name):
        return None
    try:
        return format_source(name, text)
    except PolicyError:
        return None


_MEANT = re.compile(r"\(did you mean '([^']+)'\?\)")
_UNKNOWN = re.compile(r"'([^']+)'")


@dataclass(frozen=True)
class Fix:
    title: str
    span: Span
    text: str


def quick_fix(diagnostic: Diagnostic, source: str) -> Fix | None:
    """The checker's or parser's suggestion as an edit: ``(did you mean 'X'?)`` replaces the word
    the diagnostic points at, when the span covers exactly the word its message names."""
    meant = _MEANT.search(diagnostic.message) or (_MEANT.search(diagnostic.hint) if diagnostic.hint else None)
    if meant:
        named = _UNKNOWN.search(diagnostic.message)
        if named and spans_equal_text(diagnostic.span, source, named.group(1)):
            return Fix(f"replace '{named.group(1)}' with '{meant.group(1)}'", diagnostic.span, meant.group(1))
        return None
    return None


_REFERENCE = re.compile(r"([\w.-]+\.(?:policy|yaml)):(\d+):(\d+)")
_AT_LINE = re.compile(r"\bat line (\d+)")


def related(diagnostic: Diagnostic) -> list[tuple[Span, str]]:
    """The other places a message names (``file:line:col``, or ``at line N`` of its own file)."""
    found = [(Span(m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(2)), int(m.group(3)) + 1), "named here")
             for text in (diagnostic.message, diagnostic.hint or "") for m in _REFERENCE.finditer(text)]
    found += [(Span(diagnostic.span.file, int(m.group(1)), 1, int(m.group(1)), 2), "named here")
              for m in _AT_LINE.finditer(diagnostic.message)]
    return found
