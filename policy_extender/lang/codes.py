"""The catalogue of error codes: every code a policy error (``Diagnostic``) or an evaluation
error (``EvalError``) carries, with a title, what it means and how to fix it.

Code that raises an error names it from here (``codes.E201``), never as a string literal;
tests/lang/test_codes.py fails on a code used but not catalogued, on a catalogued code no code
uses, and on a code without a golden case in tests/lang/cases. docs/language.md shows this
table (generated: ``python -m policy_extender.lang.reference --write docs/language.md``).

Families: E0xx reading, E1xx syntax, E2xx names and fields, E3xx types, E4xx rule structure,
E5xx bounds (E50x at load time, E51x at evaluation time). Wxxx are warnings (the set loads;
``check`` shows them, ``check --strict`` fails on them), numbered in the family of their E codes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Code:
    code: str
    title: str
    meaning: str
    hint: str


#: Every code, in order.
CATALOGUE: dict[str, Code] = {}


def _code(code: str, title: str, meaning: str, hint: str) -> str:
    CATALOGUE[code] = Code(code, title, meaning, hint)
    return code


E000 = _code("E000", "cannot read", "a policy file or directory cannot be read (a file that is not "
             "UTF-8, say); reported by `check`", "the message says what to fix")
E001 = _code("E001", "bad values file", "the values file (`values.yaml`) is not YAML, not a mapping "
             "of parameter keys, sets one key twice, or names a policy file the set does not hold",
             "keys are POLICY.PARAM (binpack.gpu_weight) or POLICY.MAP.KEY (binpack.resources.nvidia.com/gpu)")
E002 = _code("E002", "two values files", "a policy set holds more than one values file (`dev-values.yaml` "
             "beside `prod-values.yaml`): which one wins would depend on the names",
             "keep one values file per set: the cluster's, given with --values FILE (serve: values_file)")

E101 = _code("E101", "syntax error", "the text is not a statement of the language: an unexpected "
             "token, an incomplete statement, `=` for `==`, chained comparisons, a rule name without "
             "its `:` (or with a space before it), a misspelled keyword or modifier, a `\"` inside a "
             "reason's `{...}` hole",
             "the message or its hint names what was expected")
E102 = _code("E102", "bad character or string", "a character no token starts with, or a string "
             "not closed on its line", "close the string with its quote on the same line")
E103 = _code("E103", "unknown escape", "a backslash escape a string does not know",
             "the error's own hint lists the escapes a string knows")
E104 = _code("E104", "no such operator", "an operator the language does not have: `**`, `&&`, "
             "`||`, `!`", "the message names what to write: x * x, and, or, not")
E107 = _code("E107", "bad reason template", "a `{` or `}` of a reason template that opens or "
             "closes no hole", "write {{ and }} for literal braces")

E201 = _code("E201", "unknown field", "a field the object does not have, or a resource key "
             "that could only ever read 0 (`[\"gpumem\"]` for `[\"nvidia.com/gpumem\"]`)", "the message suggests the closest field; docs/language.md lists them")
E202 = _code("E202", "unknown name", "a name that is neither a context name, a `let`, a "
             "shorthand nor an aggregate's variable", "the hint lists the names of that rule kind")
E203 = _code("E203", "unknown function", "a call of a function that is not a builtin",
             "docs/language.md lists every builtin")
E204 = _code("E204", "name defined twice", "a `let` of a name already defined, or one that "
             "would hide a context name or shorthand", "rename the let")
E205 = _code("E205", "key with '-' after a dot", "a map key with `-` written after a dot "
             "(`task.annotations.allow-any-gpu`) reads as a subtraction of names",
             "write the key in brackets: task.annotations[\"allow-any-gpu\"]")
E206 = _code("E206", "bad parameter", "a `param` of a type the language does not have, "
             "a name already defined, or a default of another type than the one declared",
             "a parameter is a number, string, bool or map[number]: param gpu_weight: number = 2")
E207 = _code("E207", "unknown parameter", "the values file sets a parameter that its policy "
             "file does not declare", "the message suggests the closest parameter of that file")
E208 = _code("E208", "shared name defined twice", "two `shared let` of one name (in one file or "
             "two), or a file's own `let` or `param` that would hide a shared one",
             "rename one of them: a shared name means one thing in the whole set")

E301 = _code("E301", "wrong operand type", "an operator, a field read or `for` applied to a "
             "value of a type it does not take", "the message says which type was found")
E302 = _code("E302", "comparison that never matches", "a comparison or membership test "
             "between types that never match (a label string with a number or a bool): `==` and `in` "
             "are always false, `!=` and `not in` always true",
             "convert with number(...) or string(...); labels and annotations are strings: compare with \"true\"")
E303 = _code("E303", "bool needed", "`and`, `or`, `not`, `if` or a filter condition given "
             "something that is not a bool", "compare it to get a bool")
E304 = _code("E304", "types differ", "the elements of a list, or the branches of `if`, have "
             "different types", "convert them to one type")
E305 = _code("E305", "wrong rule type", "a rule's expression is not of the type its kind needs "
             "(a bool for a filter, a number for a score)", "docs/language.md lists each kind's type")
E306 = _code("E306", "wrong argument", "an argument of a builtin of the wrong type, or one that "
             "must be a literal and is not", "the hint gives the builtin's signature")
E307 = _code("E307", "wrong number of arguments", "a builtin called with too few or too many "
             "arguments", "the hint gives the builtin's signature")
E308 = _code("E308", "invalid regex", "the pattern of matches() does not compile, or compiles to "
             "more than 2048 instructions of the regex engine (RE2)",
             "the message quotes the regex engine's error, or says how large the pattern is")
E309 = _code("E309", "bad index", "`[...]` on a value that cannot be indexed, or with a key of "
             "the wrong type", "maps take strings, lists take numbers")
E310 = _code("E310", "parameter value of the wrong type", "the values file sets a parameter to "
             "a value of another type than its `param` declares", "write a value of the declared type")
E311 = _code("E311", "not a constant", "`weight` or `normalize` given a name that is not a "
             "number parameter or a shared let of a number literal",
             "write a number, or declare `param NAME: number = 2` in the file")

E401 = _code("E401", "name not available here", "a name that a rule of this kind does not "
             "have (`node` in an enqueue rule)", "the hint lists the names of that rule kind")
E402 = _code("E402", "rule name used twice", "two rules with one name, in one file or two",
             "rule names are unique across all policy files")
E403 = _code("E403", "modifier does not apply", "a modifier that this kind of rule does not "
             "take (`weight` on a filter)", "the hint says which kinds take it")
E404 = _code("E404", "modifier given twice", "one modifier twice on one rule",
             "keep one of them")
E405 = _code("E405", "misplaced file guard", "a second guard in a file, or a guard after the "
             "first rule", "one guard per file, before its rules")
E406 = _code("E406", "bad normalize range", "`normalize LOW to HIGH` with LOW not below HIGH",
             "swap the bounds")
E407 = _code("E407", "file name twice", "two policy directories hold a file of the same name",
             "rename one of the files: a policy file is known by its name")
E408 = _code("E408", "misplaced audit", "the file-wide `audit` given twice, after the first "
             "rule, or repeated on a rule of an audited file", "one `audit` line, before the rules")
E409 = _code("E409", "bad protocol statement", "the file-wide `protocol` given twice, after the "
             "first rule, or naming a scheduler twice or one that is not `volcano` or `kube-scheduler`",
             "one `protocol` line before the rules, e.g. `protocol volcano, kube-scheduler`")
E410 = _code("E410", "rule kind not served by the protocol", "a rule of a kind the file's `protocol` "
             "has no verb for (kube-scheduler serves only filter, score, victim and preemptable rules)",
             "move the rule to a file that serves volcano")
E411 = _code("E411", "not sent by the protocol", "a read, in a rule of a file that serves kube-scheduler "
             "(through its guard, lets and shorthands too), of what kube-scheduler never sends: the `job`, "
             "`queue` and `session` roots, and `task`/`evictor`/`evictee`/`node` fields a v1.Pod or v1.Node "
             "does not carry (`node.idle`: the node comes without its pods)",
             "read what it sends (`node.allocatable` for `node.idle`), or serve the rule to volcano only")

E501 = _code("E501", "file too large", "a policy file over 256 KiB", "split it into several files")
E502 = _code("E502", "nested too deep", "an expression nested more than 100 levels deep",
             "name parts of it with let")
E503 = _code("E503", "number literal out of range", "a number literal beyond 2^63",
             "use a smaller number")
E504 = _code("E504", "regex needs backtracking", "a matches() pattern with a construct the linear-time "
             "engine (RE2) does not have: a backreference, a lookahead or lookbehind, an atomic group, a "
             "possessive quantifier, a conditional group, `\\Z`", "the message says what to write instead")
E510 = _code("E510", "number out of range", "evaluation produced a number beyond 2^63",
             "the rule errs for this input; bound the arithmetic")
E511 = _code("E511", "result too long", "evaluation built a string or list longer than 65536",
             "the rule errs for this input; build less")
E512 = _code("E512", "evaluation too large", "an aggregate over more than 100000 elements, or "
             "one call visiting more than 1000000 in all (every evaluation of the call together: a "
             "score rule once per node of a prioritize call)",
             "the rule errs for this input; aggregate over less (`check` estimates each rule's cost, "
             "`check --scale` measures it)")
E513 = _code("E513", "past the scheduler's timeout", "a call still evaluating `volcano_timeout` "
             "seconds after it began to arrive: Volcano has given up on the answer (its "
             "`extender.httpTimeout`), so the call stops and answers 500",
             "make the rules cheaper (`check --scale`), or raise extender.httpTimeout and volcano_timeout together")

W001 = _code("W001", "empty values file", "a values file that sets nothing (empty, or only comments): "
             "every parameter keeps its default", "set the cluster's values in it, or leave it out of the set")
W201 = _code("W201", "unused let", "a `let` that no rule reads (a warning: the set loads)",
             "use it in a rule or remove it; `check --strict` makes warnings errors")
W301 = _code("W301", "protection overridden by another tier", "a victim rule protects pods that another "
             "plugin of the scheduler conf (check --scheduler-conf) can still evict: a later tier chooses again "
             "when the extender's tier ends with no victims, or a plugin after the extender in its tier starts over",
             "policy-extender volcano-conf --final-victims switches the other plugins' victim functions off")
W302 = _code("W302", "if none abstain on a protecting rule", "a victim rule with `if none abstain` under a "
             "scheduler conf where other plugins choose victims: its Abstain lets them evict what it refuses",
             "drop `if none abstain`, or make the victim rules final (volcano-conf --final-victims)")
W401 = _code("W401", "enqueue rule sizes a job by its pods", "an enqueue rule reads `job.total_request` or "
             "`job.tasks` (directly, or through a let, a guard or its reason) and not what the PodGroup asks (`job.min_resources`; "
             "for `job.tasks`, `job.min_available` too): a Volcano Job "
             "has no pods until its PodGroup is Inqueue, so at enqueue its total_request is 0 and its tasks empty, and "
             "the rule judges every vcjob as one that asks for nothing (a warning: the set loads)",
             "read what the PodGroup asks: max(job.total_request.gpu, job.min_resources.gpu), or job.min_resources "
             "(job.min_available for a number of tasks)")
W501 = _code("W501", "quadratic rule", "a rule whose cost per call (elements visited, estimated from its "
             "expression: docs/language.md, \"Cost\") has a term with two sizes that grow with the cluster "
             "(nodes x nodes, nodes x this cycle's allocations, ...): it passes small fixtures and meets "
             "E512 or E513 at scale (a warning: the set loads)",
             "the message says what to read instead; `check --scale nodes=N,tasks=M` measures the rule")
