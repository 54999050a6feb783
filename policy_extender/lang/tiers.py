"""What a scheduler conf does to a set's victim rules: where, in Volcano's tiers, another plugin
can evict a pod a victim rule protects (``check --scheduler-conf``, W301 and W302).

Volcano asks every plugin of a tier for victims (Session.Preemptable / Session.Reclaimable,
framework/session_plugins.go) and stops at the first tier that found some: an extender answer
that protects every evictee (Permit, no victims) ends its tier with none, and the next tier's
plugins choose again from all evictees; an Abstain (``if none abstain``) is skipped, and the
other plugins of the tier choose alone. A plugin whose ``enablePreemptable`` /
``enableReclaimable`` is false is not asked (``volcano-conf --final-victims`` switches them off).
"""

from __future__ import annotations

from policy_extender.errors import Diagnostic, Span
from policy_extender.verb_names.volcano import VICTIM_PLUGINS, VICTIM_SWITCH

from . import codes

#: rule kind -> the actions whose victims it narrows
ACTIONS_OF_KIND = {"victim": ("preempt", "reclaim"), "preemptable": ("preempt",), "reclaimable": ("reclaim",)}
VERB_ARGUMENT = {"preempt": "extender.preemptableVerb", "reclaim": "extender.reclaimableVerb"}
FIX = ("make the set's victim rules final: policy-extender volcano-conf --final-victims (it sets "
       "enablePreemptable / enableReclaimable: false on the other plugins)")


def victim_plugins(conf: dict, action: str) -> tuple[int | None, list[tuple[int, int, str]]]:
    """(the extender's tier, or None when it is not asked for ``action``) and every other plugin
    Volcano asks for ``action``'s victims under ``conf``, as (tier, position, name)."""
    extender_tier, others = None, []
    for t, tier in enumerate(conf.get("tiers") or []):
        for p, plugin in enumerate((tier or {}).get("plugins") or []):
            name = str((plugin or {}).get("name"))
            if plugin.get(VICTIM_SWITCH[action], True) is False:
                continue
            if name == "extender":
                if (plugin.get("arguments") or {}).get(VERB_ARGUMENT[action]):
                    extender_tier = t
                continue
            if action not in VICTIM_PLUGINS.get(name, ()):
                continue
            if (name, action) == ("drf", "reclaim") and not plugin.get("enableHierarchy"):
                continue  # drf registers its reclaim function only with hierarchy on
            others.append((t, p, name))
    return extender_tier, others


def conf_actions(conf: dict) -> set[str]:
    return {a.strip() for a in str(conf.get("actions") or "").split(",")}


def warnings(rules, conf: dict, conf_name: str) -> list[Diagnostic]:
    """W301 and W302 for the victim rules of ``rules`` (compiled rules: kind, name, file, line,
    column, abstain_if_none, audit) under ``conf`` (the scheduler conf, parsed)."""
    out: list[Diagnostic] = []
    actions = conf_actions(conf)
    for rule in rules:
        if rule.kind not in ACTIONS_OF_KIND or rule.audit:
            continue
        span = Span(rule.file, rule.line, rule.column, rule.line, rule.column + len(rule.kind))
        for action in ACTIONS_OF_KIND[rule.kind]:
            if action not in actions:
                continue
            tier, others = victim_plugins(conf, action)
            if tier is None:
                continue
            extender_position = _extender_position(conf, tier)
            later = [f"tier {t + 1} {n}" for t, _, n in others if t > tier]
            after = [f"tier {t + 1} {n}" for t, p, n in others if t == tier and p > extender_position]
            same = [f"tier {t + 1} {n}" for t, _, n in others if t == tier]
            if later or after:
                why = []
                if later:
                    why.append(f"when it protects every evictee the extender's tier ends with no victims and "
                               f"{', '.join(later)} choose{'s' * (len(later) == 1)} again from all of them")
                if after:
                    why.append(f"{', '.join(after)} come{'s' * (len(after) == 1)} after the extender in its tier "
                               "and start over when the intersection is empty")
                out.append(Diagnostic(codes.W301, f"{rule.kind} rule '{rule.name}': its protection does not hold "
                                      f"in {action} under {conf_name}: {'; and '.join(why)}", span, FIX,
                                      severity="warning"))
            if rule.abstain_if_none and (same or later):
                out.append(Diagnostic(codes.W302, f"{rule.kind} rule '{rule.name}' says `if none abstain`: when no "
                                      f"evictee qualifies, Volcano skips the Abstain in {action} and "
                                      f"{', '.join(same + later)} evict{'s' * (len(same + later) == 1)} the pods "
                                      f"this rule refuses (under {conf_name})", span,
                                      "drop `if none abstain` (Permit with no victims protects them), or " + FIX,
                                      severity="warning"))
    return out


def _extender_position(conf: dict, tier: int) -> int:
    plugins = conf["tiers"][tier].get("plugins") or []
    return next(p for p, plugin in enumerate(plugins) if (plugin or {}).get("name") == "extender")
