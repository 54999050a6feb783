"""The checker's shared definitions and parameters (docs/language.md): each ``shared let`` once
in the set, each file's ``param`` s typed and bound to their value (the default or the values
file's). ``ParamChecks`` is mixed into ``checker.Checker``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from policy_extender import schema
from policy_extender.errors import Span
from policy_extender.lang import ast, codes, types
from policy_extender.lang.hints import did_you_mean, with_article
from policy_extender.lang.scope import ALL_ROOTS, Scope, Typed
from policy_extender.lang.values import Setting


class ParamChecks:
    """The ``shared let`` and ``param`` half of ``checker.Checker`` (which defines what is declared here)."""

    files: list[ast.PolicyFile]
    settings: list[Setting] | tuple
    shared: dict[str, ast.Let]
    params: dict[str, dict[str, ast.Let]]
    param_lets: set[int]
    used_lets: set[int]

    if TYPE_CHECKING:
        def error(self, code: str, message: str, span: Span, hint: str | None = None) -> Typed: ...

        def expr(self, node, scope: Scope) -> Typed: ...

    # --- shared definitions and parameters (docs/language.md) -----------------------------------

    def check_shared(self) -> None:
        """The ``shared let`` s of every file: one of each name in the whole set, each checked
        against the shared lets above it in its own file (a shared let reads no file's lets)."""
        for file in self.files:
            for let in file.statements:
                if not (isinstance(let, ast.Let) and let.shared):
                    continue
                first = self.shared.get(let.name)
                if first is not None:
                    for here, there in ((let, first), (first, let)):
                        self.error(codes.E208, f"shared let '{let.name}' is also defined at {there.span}", here.span,
                                   "a shared name means one thing in the whole set: rename or remove one")
                    continue
                if let.name in ALL_ROOTS or let.name in schema.SHORTHANDS:
                    what = "context root" if let.name in ALL_ROOTS else "shorthand"
                    self.error(codes.E204, f"let '{let.name}' would hide the {what} '{let.name}'", let.span,
                               "give the binding another name")
                self.shared[let.name] = let
        for let in self.shared.values():
            if let.expr is not None:
                self.expr(let.expr, Scope(None, self.lets_before(self.shared, let)))

    def hides_shared(self, name: str, span: Span) -> bool:
        """A file's own let or param named like a shared let: reported (E208)."""
        shared = self.shared.get(name)
        if shared is None:
            return False
        self.error(codes.E208, f"'{name}' would hide the shared let '{name}' of {shared.span}", span,
                   "give this one another name, or use the shared one")
        return True

    def shared_unavailable_here(self, node: ast.Name, let: ast.Let, scope: Scope) -> None:
        """E401 at a rule's use of a shared let that reads what the rule's kind does not have
        (reported at the read too, in the shared let's file)."""
        roots = ", ".join(schema.DECISION_ROOTS[scope.kind])  # type: ignore[index]  # a rule's scope: kind is set
        self.error(codes.E401, f"shared let '{let.name}' ({let.span}) reads a name that is not available in "
                   f"{with_article(scope.kind)} rule", node.span, f"{scope.kind} rules can read {roots}")  # type: ignore[arg-type]  # as above

    def lets_before(self, lets: dict[str, ast.Let], let: ast.Let) -> dict[str, ast.Let]:
        """What ``let`` 's expression may read: a shared let, the shared lets above it in its file;
        a file's let, the lets above it, its file's params and every shared let."""
        if let.shared:
            return {n: other for n, other in self.shared.items()
                    if other.span.file == let.span.file and other.span.line < let.span.line}
        return {n: other for n, other in lets.items()
                if other.shared or id(other) in self.param_lets or other.span.line < let.span.line}

    def check_params(self) -> None:
        """Each file's ``param`` s (type, default, name), then the values file's settings; every
        param becomes a let of its file bound to its value (the default, or the values file's)."""
        declared: dict[str, dict[str, ast.Param]] = {}
        for file in self.files:
            params = declared.setdefault(file.name, {})
            for param in (s for s in file.statements if isinstance(s, ast.Param)):
                if not self.bad_param(param, params):
                    params[param.name] = param
                elif param.name not in (*params, *self.shared, *ALL_ROOTS, *schema.SHORTHANDS):
                    # a param whose default is wrong: its uses read 'any', not 'unknown name'
                    self.params.setdefault(file.name, {})[param.name] = ast.Let(param.name, None, param.span)  # type: ignore[arg-type]  # never compiled: an error
        values = {name: {p: param.default for p, param in params.items()} for name, params in declared.items()}
        stems = {_stem(name): name for name in declared}
        for setting in self.settings:
            self.apply_setting(setting, declared, values, stems)
        for name, params in declared.items():
            lets = self.params.setdefault(name, {})  # (holding the bad params' stand-ins already)
            for param_name, param in params.items():
                let = ast.Let(param_name, ast.Literal(values[name][param_name], param.default_span), param.span)
                lets[param_name] = let
                self.param_lets.add(id(let))

    def bad_param(self, param: ast.Param, params: dict[str, ast.Param]) -> bool:
        """A param declared twice, hiding a name, or whose default is not of its type: reported."""
        if param.name in params:
            self.error(codes.E206, f"parameter '{param.name}' is already declared at line "
                       f"{params[param.name].span.line}", param.name_span, "remove one")
            return True
        if param.name in ALL_ROOTS or param.name in schema.SHORTHANDS:
            what = "context root" if param.name in ALL_ROOTS else "shorthand"
            self.error(codes.E206, f"param '{param.name}' would hide the {what} '{param.name}'", param.name_span,
                       "give the parameter another name")
            return True
        if self.hides_shared(param.name, param.name_span):
            return True
        if not param_fits(param.type, param.default):
            self.error(codes.E206, f"the default of '{param.name}' is {_describe_value(param.default)}, "
                       f"not {types.describe(param.type)}", param.default_span,
                       f"write {_example(param.type)}, or declare another type")
            return True
        return False

    def apply_setting(self, setting: Setting, declared, values, stems: dict[str, str]) -> None:
        """One key of the values file: the param it sets, type-checked (E001, E207, E310)."""
        stem = max((s for s in stems if setting.key.startswith(s + ".")), key=len, default=None)
        if stem is None:
            policy = setting.key.split(".", 1)[0]
            self.error(codes.E001, f"'{setting.key}': no policy file '{policy}.policy' in the set"
                       f"{did_you_mean(policy, stems)}", setting.key_span,
                       "a key starts with the name of a policy file of the set, without .policy")
            return
        file = stems[stem]
        params, rest = declared[file], setting.key[len(stem) + 1:]
        name, _, key = rest.partition(".") if rest not in params else (rest, "", "")
        param = params.get(name)
        if param is None:
            declares = ", ".join(f"{p.name} ({p.name_span})" for p in params.values()) or "nothing"
            self.error(codes.E207, f"{file} declares no parameter '{rest}'{did_you_mean(rest, params)}",
                       setting.key_span, f"{file} declares: {declares}")
            return
        wanted = types.element(param.type) if key else param.type
        if param.type == "map[number]" and not key:
            self.error(codes.E310, f"'{setting.key}' is a map[number] (declared at {param.name_span}): set one "
                       "key of it", setting.value_span, f"write {setting.key}.nvidia.com/gpu: 2")
        elif key and not types.is_map(param.type):
            self.error(codes.E310, f"'{stem}.{name}' is {types.describe(param.type)} (declared at "
                       f"{param.name_span}), not a map: '.{key}' names nothing", setting.key_span,
                       f"write {stem}.{name}: {_example(param.type)}")
        elif not param_fits(wanted, setting.value):  # type: ignore[arg-type]  # a map type has an element
            self.error(codes.E310, f"'{setting.key}' is {types.describe(wanted)} (declared at {param.name_span}), "  # type: ignore[arg-type]  # as above
                       f"this is {_describe_value(setting.value)}", setting.value_span,
                       f"write {_example(wanted)}")  # type: ignore[arg-type]  # as above
        elif key:
            values[file][name] = {**values[file][name], key: setting.value}
        else:
            values[file][name] = setting.value

    def constant(self, value, scope: Scope, modifier: str):
        """The number a ``weight`` / ``normalize`` bound stands for: a literal, a number param of
        the file, or a shared let of a number literal; None (reported, E311) otherwise."""
        if not isinstance(value, ast.Name):
            return value
        let = scope.lets.get(value.name)
        literal = let.expr if let is not None else None
        if isinstance(literal, ast.Literal) and param_fits("number", literal.value):
            self.used_lets.add(id(let))
            return literal.value
        params = [n for n, other in scope.lets.items() if id(other) in self.param_lets
                  and isinstance(other.expr, ast.Literal) and param_fits("number", other.expr.value)]
        self.error(codes.E311, f"'{modifier}' takes a number: '{value.name}' is not a number parameter of this "
                   f"file or a shared let of a number{did_you_mean(value.name, params)}", value.span,
                   f"declare it, e.g. `param {value.name}: number = 1`, or write the number")
        return None


def _stem(file: str) -> str:
    """A policy file's name as the values file's keys name it: without ``.policy``."""
    return file[:-len(".policy")] if file.endswith(".policy") else file


def param_fits(type_: str, value: object) -> bool:
    """Whether a default or a values-file value is of a ``param`` type."""
    if type_ == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if type_ == "map[number]":
        return isinstance(value, dict) and all(param_fits("number", v) for v in value.values())
    return isinstance(value, {"string": str, "bool": bool}[type_])


def _describe_value(value: object) -> str:
    if isinstance(value, bool):
        return f"the bool {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, dict):
        return "a map"
    return "null" if value is None else f"a {type(value).__name__}"


def _example(type_: str) -> str:
    return {"number": "a number, e.g. 2", "string": "a string, e.g. \"a100\"", "bool": "true or false",
            "map[number]": "a map, e.g. {\"nvidia.com/gpu\": 2}"}.get(type_, type_)
