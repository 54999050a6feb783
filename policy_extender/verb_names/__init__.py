"""Each scheduler protocol's verb names, one module per protocol (``volcano``, ``kube_scheduler``), the one place they are written.
May import nothing; the configuration and the CLI read them at start-up, and every layer above may.
"""
