"""kube-scheduler's extender verbs, the one place they are written. Imports nothing.

kube-scheduler's ``Extender`` config (``kubescheduler.config.k8s.io/v1``) names a URL path per
verb: ``filterVerb``, ``prioritizeVerb``, ``preemptVerb`` (``bindVerb`` is not served). Each verb
has two names here:

- its kind, the internal name the service, the metrics and the recordings use; distinct from
  every Volcano verb kind (Volcano has a ``prioritize`` too), so one ``serve`` routes both;
- its config name (``filter`` for ``filterVerb``), which is also its default URL path under
  ``kube_scheduler_prefix`` and the key of the ``kube_scheduler_verbs`` option.
"""

#: the protocol's name (the ``protocol`` statement's, ``PolicySet.for_protocol``'s, the metrics' label)
PROTOCOL = "kube-scheduler"

FILTER = "kube-scheduler.filter"
PRIORITIZE = "kube-scheduler.prioritize"
PREEMPT = "kube-scheduler.preempt"

VERB_KINDS: tuple[str, ...] = (FILTER, PRIORITIZE, PREEMPT)

#: kind -> its name in kube-scheduler's Extender config (``<name>Verb``) and default path.
CONFIG_NAMES: dict[str, str] = {FILTER: "filter", PRIORITIZE: "prioritize", PREEMPT: "preempt"}
