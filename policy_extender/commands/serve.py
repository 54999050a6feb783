"""``policy-extender serve``: run the extender service under gunicorn.

The process that runs this command is gunicorn's master. Before gunicorn starts, it becomes an
*instance* (``policy_extender.instance``): it claims an explicit ``sqlite:PATH`` store (refusing to
start when another live master owns it), makes its private runtime directory (the default
session store, the metrics directory, the last good policy set) and hands the resolved
configuration to the workers it forks. The directory is removed when the master exits
(gunicorn's ``on_exit`` hook, and in any case when ``run`` returns or raises).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import sys

HELP = "run the extender service (gunicorn) on the policy directories"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from policy_extender.config import OPTIONS, flag_name  # lazy: commands/__init__
    parser.add_argument("--config", metavar="FILE", help="YAML configuration file (options below "
                        "override it; environment variables POLICY_EXTENDER_<OPTION> too)")
    for option in OPTIONS:
        flags = [flag_name(option.name), *(["--values"] if option.name == "values_file" else [])]
        parser.add_argument(*flags, dest=option.name, default=None,
                            metavar=option.name.upper(), help=option.metadata["help"].replace("%", "%%"))
    parser.add_argument("--check", action="store_true",
                        help="load the configuration and the policies, print them, and exit")


def run(args: argparse.Namespace) -> int:
    from policy_extender import config as config_module  # lazy: commands/__init__
    try:
        config = config_module.load(_given_flags(args), config_file=args.config)
    except config_module.ConfigError as exc:
        print(f"policy-extender serve: {exc}", file=sys.stderr)
        return 2
    from policy_extender import logs
    logs.configure(config.log_level, config.log_format)
    if args.check:
        policies_ok = _policies_compile(config, announce=True)
        print(config)
        return 0 if policies_ok else 1
    return _serve(config)


def _serve(config) -> int:
    """Become an instance, run gunicorn, and always remove the runtime directory afterwards."""
    from policy_extender import instance as instance_module  # lazy: commands/__init__
    from policy_extender.policyset.versions import LastGoodCopy
    signal.signal(signal.SIGTERM, _exit_on_signal)  # until gunicorn installs its own handlers
    try:
        instance = instance_module.start(config)
    except instance_module.InstanceError as exc:
        print(f"policy-extender serve: {exc}", file=sys.stderr)
        return 2
    try:
        _log_instance(instance)
        _policies_compile(instance.config, announce=False, last_good=LastGoodCopy(instance.last_good_path))
        ExtenderApplication(instance.config, instance).run()
    finally:
        instance.close()  # a no-op in forked workers unwinding through here
    return 0


def _exit_on_signal(signum, frame) -> None:
    raise SystemExit(128 + signum)


def _log_instance(instance) -> None:
    log = logging.getLogger("policy_extender.instance")
    log.info("instance runtime directory %s (master pid %d): session store %s, metrics %s",
             instance.runtime_dir, os.getpid(), _shown_store(instance.config.session_store),
             os.environ.get("PROMETHEUS_MULTIPROC_DIR"))


def _shown_store(spec: str) -> str:
    """The store setting without a password (``redis://:secret@host`` -> ``redis://***@host``,
    ``...?sentinel_password=secret`` -> ``...?sentinel_password=***``)."""
    scheme, sep, rest = spec.partition("://")
    where, query, options = rest.partition("?")
    if sep and "@" in where:
        where = "***@" + where.rsplit("@", 1)[1]
    options = re.sub(r"(sentinel_password=)[^&]*", r"\1***", options)
    return f"{scheme}{sep}{where}{query}{options}"


def _given_flags(args: argparse.Namespace) -> dict:
    from policy_extender.config import OPTIONS  # lazy: commands/__init__
    return {opt.name: getattr(args, opt.name) for opt in OPTIONS if getattr(args, opt.name) is not None}


def _policies_compile(config, announce: bool, last_good=None) -> bool:
    """Load the policies once in the master and say what was found.

    A broken set does not stop the service: it starts not ready (``/readyz`` 503 with the errors)
    and becomes ready by itself when the files are fixed (a ConfigMap update), which is kinder to
    a Kubernetes rollout than a crash loop. ``--check`` turns the errors into exit status 1.
    When serving, the reloader's own log lines (in the configured text or JSON format) say what
    was loaded; ``--check`` prints it instead (``announce``). A good set is saved as the
    instance's ``last_good`` copy before any worker starts (``policyset.versions.LastGoodCopy``).
    """
    from policy_extender.policyset.reload import PolicyReloader  # lazy: commands/__init__
    save = (lambda ps: last_good.save(ps.version, ps.sources)) if last_good is not None else None
    from policy_extender.policyset.files import ReadError
    from policy_extender.policyset.sets import policy_set_source
    try:
        source = policy_set_source(config.policy_dirs, config.values_file)
    except ReadError as error:
        print(f"policy-extender serve: {error}", file=sys.stderr)
        return False
    status = PolicyReloader(source.paths(), 0, on_change=save, inotify=False,
                            allow_empty=config.allow_empty_policy_set).reload_now()
    if not announce:
        return status.ready
    if status.ready:
        print(f"policy-extender: policy version {status.version} from {source.describe()}: "
              f"{', '.join(status.files) or 'no policy files'}", file=sys.stderr)
        return True
    print("policy-extender serve: the policies do not load, serving not ready until they are "
          "fixed:\n" + "\n".join(status.errors), file=sys.stderr)
    return False


def _application_class():
    from gunicorn.app.base import BaseApplication  # lazy: commands/__init__

    class ExtenderApplication(BaseApplication):
        """gunicorn with our settings and our app factory (no gunicorn command line)."""

        def __init__(self, config, instance=None) -> None:
            self.config_ = config
            self.instance = instance  # instance.Instance: the runtime directory, removed at exit
            super().__init__()

        def load_config(self) -> None:
            from policy_extender.gunicorn_conf import settings  # lazy: commands/__init__
            for name, value in settings(self.config_).items():
                if name in self.cfg.settings:  # settings newer than the installed gunicorn are skipped
                    self.cfg.set(name, value)

        def load(self):
            from policy_extender.web import create_app  # lazy: commands/__init__
            runtime_dir = self.instance.runtime_dir if self.instance is not None else None
            return create_app(self.config_, runtime_dir=runtime_dir)

    return ExtenderApplication


def ExtenderApplication(config, instance=None):  # CamelCase: it builds the class lazily: --help never imports gunicorn
    return _application_class()(config, instance)
