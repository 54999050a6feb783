"""Kubernetes quantity strings ("500m", "4Gi", "1", "1.5e3") parsed into whole units.

Kubernetes objects inside Volcano's bodies (PodGroup ``spec.minResources``, Queue
``spec.capability``, ``status.allocated``) carry resources as quantity strings in whole units:
``cpu: "500m"`` is half a core, ``memory: "4Gi"`` is 4 * 2**30 bytes, ``nvidia.com/gpu: "2"`` is
two devices. Volcano's own ``Resource`` objects use milli units instead; that conversion lives in
``resources.py``.
"""

from __future__ import annotations

import math
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


#: Kubernetes caps a quantity's magnitude at 2**63 - 1 ("numbers larger ... will be capped"),
#: so a bigger one never comes from the API server; one from elsewhere is capped the same way.
CAP = 2**63 - 1
_MAX_EXPONENT_DIGITS = 6  # an exponent beyond 999999 over- or underflows whatever the number


def whole(value: float) -> int | float:
    """``value`` as an int when it is integral (so 7.0 prints as 7), else unchanged."""
    return int(value) if float(value).is_integer() else value


def parse_quantity(text: str | int | float) -> int | float:
    """The quantity ``text`` in whole units, its magnitude capped at ``CAP`` as Kubernetes caps
    it. Numbers pass through (capped too); bad text raises ValueError.

    The cost is bounded whatever the text: an exponent of any length or a number of thousands of
    digits is never expanded (``10 ** 999999999`` alone took 207 s of CPU, holding the GIL)."""
    if isinstance(text, bool) or not isinstance(text, (int, float, str)):
        raise ValueError(f"expected a number or a quantity string, got {type(text).__name__} {text!r:.40}")
    if not isinstance(text, str):
        return _capped(text)
    match = _QUANTITY.match(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a Kubernetes quantity (examples: \"2\", \"500m\", \"4Gi\", \"1.5e3\")")
    number = float(match["number"])  # inf past ~1e308 digits' worth: capped below
    if match["exponent"]:
        exponent = match["exponent"][1:]
        if number == 0:
            return 0
        if len(exponent.lstrip("+-0")) > _MAX_EXPONENT_DIGITS:
            return 0 if exponent.startswith("-") else _capped(math.copysign(math.inf, number))
        return _capped(number * 10.0 ** int(exponent) if int(exponent) < 309 else number * math.inf)
    suffix = match["suffix"] or ""
    factor = _SUFFIXES[suffix]
    digits = match["number"].lstrip("+-")
    if isinstance(factor, int) and digits.isdigit():
        if len(digits.lstrip("0")) > 19:  # beyond CAP whatever the factor (int() refuses 4,300 digits)
            return _capped(number)
        return _capped(int(match["number"]) * factor)
    return _capped(round(number * factor, 9))


def _capped(value: int | float) -> int | float:
    """``value`` in whole units (``whole``) with its magnitude at most ``CAP`` (an int at the cap,
    as Kubernetes gives). An int stays as it is: ``float()`` of one past 1e308 overflows."""
    if value > CAP:
        return CAP
    if value < -CAP:
        return -CAP
    return value if isinstance(value, int) else whole(value)
