"""The Lark grammar of the policy language, shipped as package data (``policy_extender.grammar``).
Imports nothing; ``lang.parser`` reads ``policy.lark`` from it."""
