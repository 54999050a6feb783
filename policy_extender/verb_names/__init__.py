"""The verb names of each scheduler protocol the service answers, one module per protocol
(``volcano``: Volcano's ``extender.<kind>Verb``), the one place they are written.
May import nothing; the configuration and the CLI read them at start-up, every layer above may read them.
"""
