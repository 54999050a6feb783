"""This process's id, read without a system call.

``os.getpid()`` is a system call on every use (glibc stopped caching it in 2.25): about 0.12 us
on this project's VM, three times per predicate call when the metrics, the decision tally and the
session head watch each asked whether they run in a forked worker. ``pid`` is read once here and
again in every child that ``os.fork`` makes (gunicorn's workers, ``multiprocessing``'s fork start),
through ``os.register_at_fork``; code that must notice a fork compares it with what it kept.
"""

from __future__ import annotations

import os

#: this process's id, correct after every ``os.fork``
pid = os.getpid()


def _forked() -> None:
    global pid
    pid = os.getpid()


os.register_at_fork(after_in_child=_forked)
