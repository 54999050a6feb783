"""Every verb of both schedulers by its kind: Volcano's table (``table.VERBS``) and
kube-scheduler's (``kube_table.KUBE_VERBS``), for the layers above that serve, log and record a
call by what its entry says (``web``, ``record``), never by its name."""

from __future__ import annotations

from policy_extender.decide.kube_table import KUBE_VERBS
from policy_extender.decide.table import VERBS, Verb

EVERY_VERB: dict[str, Verb] = {**VERBS, **KUBE_VERBS}
assert len(EVERY_VERB) == len(VERBS) + len(KUBE_VERBS), "the two tables' verb kinds are distinct"
