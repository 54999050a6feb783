"""Kubernetes quantity strings ("500m", "4Gi", "1", "1.5e3") parsed into whole units.

Kubernetes objects inside Volcano's bodies (PodGroup ``spec.minResources``, Queue
``spec.capability``, ``status.allocated``) carry resources as quantity strings in whole units:
``cpu: "500m"`` is half a core, ``memory: "4Gi"`` is 4 * 2**30 bytes, ``nvidia.com/gpu: "2"`` is
two devices. Volcano's own ``Resource`` objects use milli units instead; that conversion lives in
``resources.py``.
"""

from __future__ import annotations

import re

_SUFFIXES: dict[str, int | float] = {
    "n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}

#: The whole grammar of a Kubernetes quantity (resource.Quantity): a signed decimal number, then
#: either a decimal exponent (``e3``) or a binary/decimal SI suffix.
QUANTITY_PATTERN = (
    r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:[eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$"
)
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<exponent>[eE][+-]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$"
)


def whole(value: float) -> int | float:
    """``value`` as an int when it is integral (so 7.0 prints as 7), else unchanged."""
    return int(value) if float(value).is_integer() else value


def parse_quantity(text: str | int | float) -> int | float:
    """The quantity ``text`` in whole units. Numbers pass through; bad text raises ValueError."""
    if isinstance(text, bool):
        raise ValueError(f"expected a quantity, got {text!r}")
    if isinstance(text, (int, float)):
        return whole(text)
    match = _QUANTITY.match(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a Kubernetes quantity (examples: \"2\", \"500m\", \"4Gi\", \"1.5e3\")")
    number = float(match["number"])
    if match["exponent"]:
        return whole(number * 10 ** int(match["exponent"][1:]))
    suffix = match["suffix"] or ""
    factor = _SUFFIXES[suffix]
    if isinstance(factor, int) and match["number"].lstrip("+-").isdigit():
        return int(match["number"]) * factor
    return whole(round(number * factor, 9))
