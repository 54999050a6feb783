"""The policy set a worker serves: the one directory reader and content hash, compiling, versions, reload and watch.
May import lang, decide, errors, logs and metrics; never session, record, service, web, replay or commands.
"""

from policy_extender.lang.probe import Probe
from policy_extender.policyset.compile import SUFFIXES, compile_sources, load_directories, read_sources
from policy_extender.policyset.sets import PolicySetSource, load_set, policy_set_source, read_set

__all__ = ["SUFFIXES", "PolicySetSource", "Probe", "compile_sources", "load_directories", "load_set", "policy_set_source",
           "read_set", "read_sources"]
