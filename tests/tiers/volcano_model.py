"""A model of how Volcano's session combines plugin answers across tiers, one pure function per
verb. Read from volcano-sh/volcano ``pkg/scheduler/framework/session_plugins.go`` at HEAD (the Go
function each one follows is named in its docstring); ``../shared/volcano-wire.md`` has the table.

A conf is a list of tiers; a tier is a list of (plugin name, answer) in the order the conf lists
them. Plugins that do not register the verb's function, or whose ``enable…`` flag is false, are
left out by ``registered`` (Volcano's ``if !isEnabled(...) { continue }`` and ``if !found``).
"""

from __future__ import annotations

PERMIT, ABSTAIN, REJECT = 1, 0, -1

#: Which plugins of Volcano's default conf (plus the extender) register which session function,
#: from their OnSessionOpen (``ssn.AddPreemptableFn`` ...), and the conf flag that switches it
#: off (conf/scheduler_conf.go). drf registers its reclaimable function only with
#: enableHierarchy; jobEnqueueable is gated by enableJobEnqueued (session_plugins.go
#: JobEnqueueable checks plugin.EnabledJobEnqueued).
REGISTERS = {
    "preemptable": ({"priority", "gang", "conformance", "drf", "extender"}, "enablePreemptable"),
    "reclaimable": ({"gang", "conformance", "proportion", "extender"}, "enableReclaimable"),
    "jobEnqueueable": ({"overcommit", "proportion", "extender"}, "enableJobEnqueued"),
    "queueOverused": ({"proportion", "extender"}, "enabledOverused"),
    "jobReady": ({"gang", "extender"}, "enableJobReady"),
    "predicate": ({"predicates", "extender"}, "enablePredicate"),
}

#: The extender registers a verb only when its ``extender.<verb>Verb`` argument is set
#: (plugins/extender/extender.go: ``if ep.config.preemptableVerb != "" { ssn.AddPreemptableFn``).
EXTENDER_VERB_ARGUMENT = {verb: f"extender.{verb}Verb" for verb in REGISTERS}


def registered(conf: dict, verb: str) -> list[list[str]]:
    """The plugin names, tier by tier, whose function for ``verb`` Volcano calls under ``conf``."""
    names, flag = REGISTERS[verb]
    tiers = []
    for tier in conf["tiers"]:
        plugins = []
        for plugin in tier["plugins"]:
            if plugin["name"] not in names or plugin.get(flag, True) is False:
                continue
            if plugin["name"] == "extender" and not plugin.get("arguments", {}).get(EXTENDER_VERB_ARGUMENT[verb]):
                continue
            plugins.append(plugin["name"])
        tiers.append(plugins)
    return tiers


def evictable(tiers: list[list[tuple[str, list[str], int]]]) -> list[str] | None:
    """Session.Preemptable / Session.Reclaimable: each answer is (plugin, victim uids, status).

    Inside a tier: status 0 is skipped (``if abstain == 0 { continue }``); an empty list ends the
    tier with no victims (``victims = nil; break``); the first list starts the victims, later ones
    intersect (keeping the earlier list's order), and an empty intersection is nil again, so the
    next plugin's list starts over. After a tier: victims, if any, are the answer ("Plugins in
    this tier made decision if victims is not nil"); otherwise the next tier decides. None is
    Go's nil (no victims). This is Volcano v1.14.1 and v1.15.1; v1.10.0 keeps one ``init`` flag
    for the whole walk instead of testing ``victims == nil``, so once a plugin has proposed
    victims an empty result stays empty, in later tiers too (measured:
    e2e/volcano/cases, victim-reclaim-all-protected-before-v1.11)."""
    victims: list[str] | None = None
    for tier in tiers:
        for _plugin, candidates, status in tier:
            if status == 0:
                continue
            if not candidates:
                victims = None
                break
            if victims is None:
                victims = list(candidates)
            else:
                victims = [v for v in victims for c in candidates if v == c] or None
        if victims is not None:
            return victims
    return victims


def enqueueable(tiers: list[list[tuple[str, int]]]) -> bool:
    """Session.JobEnqueueable: any Reject → false at once; a Permit in a tier → true after that
    tier (later tiers not asked); only abstentions → true."""
    found = False
    for tier in tiers:
        for _plugin, status in tier:
            if status < 0:
                return False
            if status > 0:
                found = True
        if found:
            return True
    return True


def asked_for_enqueue(tiers: list[list[tuple[str, int]]]) -> list[str]:
    """The plugins Session.JobEnqueueable actually calls, in order (it stops at a Reject, and
    after the tier of the first Permit)."""
    asked, found = [], False
    for tier in tiers:
        for plugin, status in tier:
            asked.append(plugin)
            if status < 0:
                return asked
            if status > 0:
                found = True
        if found:
            return asked
    return asked


def overused(tiers: list[list[tuple[str, bool]]]) -> bool:
    """Session.Overused: the first plugin answering true makes the queue overused."""
    return any(answer for tier in tiers for _plugin, answer in tier)


def ready(tiers: list[list[tuple[str, bool]]]) -> bool:
    """Session.JobReady: every plugin must answer true."""
    return all(answer for tier in tiers for _plugin, answer in tier)


def predicate(tiers: list[list[tuple[str, str | None]]]) -> str | None:
    """Session.PredicateFn: plugins in conf order; the first error (a reason) is the answer."""
    for tier in tiers:
        for _plugin, error in tier:
            if error is not None:
                return error
    return None


def predicate_order(tiers: list[list[str]]) -> list[str]:
    """The order Session.PredicateFn asks the plugins in (tier by tier, conf order)."""
    return [p for tier in tiers for p in tier]
