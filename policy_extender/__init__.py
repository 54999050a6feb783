"""policy-extender: declarative scheduling policies for Volcano's extender plugin."""

__version__ = "0.1.0"
