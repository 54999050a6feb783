"""What more than one test module uses, defined once: import it from here, never from a conftest.

- ``bodies``: the sample request bodies (``SAMPLES``, ``sample``, ``sample_json``);
- ``policies``: the policies most web tests run and ``write_policies``;
- ``app``: a fresh app per test (the ``make_app``/``app``/``client`` fixtures, offered to every
  folder by tests/conftest.py) and ``post``, a call as Volcano makes it, through the test client;
- ``recorded``: the cycle the replay tests record, and its policies;
- ``fixture_dirs``: small policy directories with fixtures, for the fixture runner's tests;
- ``stores``: how a test gets an empty session store of each kind;
- ``volcano``: a real ``policy-extender serve`` (gunicorn) and a client that calls it as Volcano does;
- ``forking``: what a function returns in a forked child, with a deadline;
- ``fast_guard``: the guard that fails a test not marked slow that starts a process or opens a socket;
- ``imports``: the import graph's cycles (the package's layering and bench/'s layout).
"""
