"""The policy language: parse → build → check → compile → evaluate (see docs/language.md)."""
