# SPDX-License-Identifier: Apache-2.0
"""Kubernetes resource.Quantity: parse, compare, add, format.

Values are held exactly as fractions.Fraction, so "1Gi" == "1024Mi" and
"500m" + "500m" == "1". Only the forms the API accepts are parsed:
<sign><digits>[.<digits>]<suffix> where suffix is a binary SI suffix
(Ki..Ei), a decimal SI suffix (n u m "" k M G T P E) or an exponent
(e3, E-2).
"""

import fractions
import re

BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
          "Pi": 2**50, "Ei": 2**60}
DECIMAL = {"n": fractions.Fraction(1, 10**9),
           "u": fractions.Fraction(1, 10**6),
           "m": fractions.Fraction(1, 1000), "": 1, "k": 10**3,
           "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}

_RE = re.compile(r"^([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
                 r"(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$")
MAX_LEN = 64


class QuantityError(ValueError):
    """A string that is not a valid quantity."""


class Quantity:
    """An exact quantity with the format it was written in."""

    __slots__ = ("value", "fmt")

    def __init__(self, value, fmt="DecimalSI"):
        self.value = fractions.Fraction(value)
        self.fmt = fmt

    @classmethod
    def parse(cls, text):
        """Parse the API string form; raise QuantityError when invalid."""
        if isinstance(text, bool):
            raise QuantityError("quantities must match the regular "
                                "expression")
        if isinstance(text, int):
            return cls(text)
        if not isinstance(text, str) or len(text) > MAX_LEN:
            raise QuantityError("quantities must match the regular "
                                "expression '^([+-]?[0-9.]+)([eEinumkKMGTP]"
                                "*[-+]?[0-9]*)$'")
        m = _RE.match(text.strip())
        if not m:
            raise QuantityError("quantities must match the regular "
                                "expression '^([+-]?[0-9.]+)([eEinumkKMGTP]"
                                "*[-+]?[0-9]*)$'")
        sign, num, suffix = m.group(1), m.group(2), m.group(3) or ""
        value = fractions.Fraction(num)
        if suffix in BINARY:
            value *= BINARY[suffix]
            fmt = "BinarySI"
        elif suffix[:1] in ("e", "E"):
            value *= fractions.Fraction(10) ** int(suffix[1:])
            fmt = "DecimalExponent"
        else:
            value *= DECIMAL[suffix]
            fmt = "DecimalSI"
        if sign == "-":
            value = -value
        return cls(value, fmt)

    def compare(self, other):
        """Return -1, 0 or 1 like Quantity.Cmp."""
        if self.value < other.value:
            return -1
        return 1 if self.value > other.value else 0

    def __eq__(self, other):
        return isinstance(other, Quantity) and self.value == other.value

    def __hash__(self):
        return hash(self.value)

    def __add__(self, other):
        return Quantity(self.value + other.value, self.fmt)

    def __sub__(self, other):
        return Quantity(self.value - other.value, self.fmt)

    def is_integer(self):
        """True when the value has no fractional part."""
        return self.value.denominator == 1

    def __str__(self):
        return format_value(self.value, self.fmt)

    def __repr__(self):
        return "Quantity(%r)" % str(self)


def _with_suffix(value, table):
    """Largest suffix in TABLE that divides VALUE exactly, or None."""
    best = None
    for suffix, mult in table.items():
        if mult < 1 or value % mult:
            continue
        if best is None or mult > table[best]:
            best = suffix
    return best


def format_value(value, fmt="DecimalSI"):
    """Canonical string of a fraction, as the API server would print it."""
    value = fractions.Fraction(value)
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    mag = abs(value)
    if mag.denominator != 1:
        for suffix in ("m", "u", "n"):
            scaled = mag / DECIMAL[suffix]
            if scaled.denominator == 1:
                return "%s%d%s" % (sign, scaled, suffix)
        # Rounded up to the nano, as resource.Quantity does.
        scaled = -((-mag * 10**9) // 1)
        return "%s%dn" % (sign, scaled)
    mag = int(mag)
    if fmt == "BinarySI":
        suffix = _with_suffix(mag, BINARY)
        if suffix:
            return "%s%d%s" % (sign, mag // BINARY[suffix], suffix)
        # Binary quantities that are not a multiple of 1Ki print in
        # decimal, like resource.Quantity does.
    suffix = _with_suffix(mag, {k: v for k, v in DECIMAL.items()
                                if isinstance(v, int)})
    if suffix:
        return "%s%d%s" % (sign, mag // DECIMAL[suffix], suffix)
    return "%s%d" % (sign, mag)


def parse(text):
    """Shorthand for Quantity.parse."""
    return Quantity.parse(text)
