"""``policy-extender serve``: run the extender service under gunicorn."""

from __future__ import annotations

import argparse
import sys

HELP = "run the extender service (gunicorn) on the policy directories"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from policy_extender.config import OPTIONS, flag_name
    parser.add_argument("--config", metavar="FILE", help="YAML configuration file (options below "
                        "override it; environment variables POLICY_EXTENDER_<OPTION> too)")
    for option in OPTIONS:
        parser.add_argument(flag_name(option.name), dest=option.name, default=None,
                            metavar=option.name.upper(), help=option.metadata["help"].replace("%", "%%"))
    parser.add_argument("--check", action="store_true",
                        help="load the configuration and the policies, print them, and exit")


def run(args: argparse.Namespace) -> int:
    from policy_extender import config as config_module
    try:
        config = config_module.load(_given_flags(args), config_file=args.config)
    except config_module.ConfigError as exc:
        print(f"policy-extender serve: {exc}", file=sys.stderr)
        return 2
    from policy_extender import logs
    logs.configure(config.log_level, config.log_format)
    policies_ok = _policies_compile(config, announce=args.check)
    if args.check:
        print(config)
        return 0 if policies_ok else 1
    ExtenderApplication(config).run()
    return 0


def _given_flags(args: argparse.Namespace) -> dict:
    from policy_extender.config import OPTIONS
    return {opt.name: getattr(args, opt.name) for opt in OPTIONS if getattr(args, opt.name) is not None}


def _policies_compile(config, announce: bool) -> bool:
    """Load the policies once in the master and say what was found.

    A broken set does not stop the service: it starts not ready (``/readyz`` 503 with the errors)
    and becomes ready by itself when the files are fixed (a ConfigMap update), which is kinder to
    a Kubernetes rollout than a crash loop. ``--check`` turns the errors into exit status 1.
    When serving, the reloader's own log lines (in the configured text or JSON format) say what
    was loaded; ``--check`` prints it instead (``announce``).
    """
    from policy_extender.reload import PolicyReloader
    status = PolicyReloader(config.policy_dirs, 0, inotify=False).reload_now()
    if not announce:
        return status.ready
    if status.ready:
        print(f"policy-extender: policy version {status.version} from {', '.join(config.policy_dirs)}: "
              f"{', '.join(status.files) or 'no policy files'}", file=sys.stderr)
        return True
    print("policy-extender serve: the policies do not load, serving not ready until they are "
          "fixed:\n" + "\n".join(status.errors), file=sys.stderr)
    return False


def _application_class():
    from gunicorn.app.base import BaseApplication

    class ExtenderApplication(BaseApplication):
        """gunicorn with our settings and our app factory (no gunicorn command line)."""

        def __init__(self, config) -> None:
            self.config_ = config
            super().__init__()

        def load_config(self) -> None:
            from policy_extender.gunicorn_conf import settings
            for name, value in settings(self.config_).items():
                if name in self.cfg.settings:  # settings newer than the installed gunicorn are skipped
                    self.cfg.set(name, value)

        def load(self):
            from policy_extender.web import create_app
            return create_app(self.config_)

    return ExtenderApplication


def ExtenderApplication(config):  # noqa: N802 - builds the class lazily: --help never imports gunicorn
    return _application_class()(config)
