# SPDX-License-Identifier: Apache-2.0
"""A small CEL parser and evaluator for DRA device selectors and
ValidatingAdmissionPolicy expressions.

It covers what DeviceClass and request selectors use in practice:
literals (string, int, uint, double, bool, null), the variable `device`
with `.driver`, `.attributes[domain].name` and `.capacity[domain].name`,
== != < <= > >=, `in` on maps and lists, && || ! and ?:, parentheses,
`quantity()` / `semver()` with compareTo / isGreaterThan / isLessThan,
size() and the string methods startsWith / endsWith / contains / matches.

For admission policies (kubesim/vap.py) it adds: variables other than
`device` (a Program is compiled against a set of declared names and
evaluated with evaluate_in(env)), objects as JSON maps (`.field` and
`["key"]`, an absent key is an error), map literals, the macros has(),
all, exists, exists_one, filter, map (2 and 3 arguments) over lists and
map keys, the string functions lowerAscii, upperAscii, trim, split,
join, replace, indexOf, lastIndexOf, substring (indexOf and lastIndexOf
also on lists, as the Kubernetes list library has them), and the conversions
string(), int(), double(), dyn(), and optionals (`x.?f`, `m[?k]`,
optional.of/none/ofNonZeroValue, hasValue/value/orValue/or).

Errors follow CEL: a reference to a missing key or field is an evaluation
error (never false), && and || absorb an error only when the other side
decides the result, and a selector must produce a bool.

Runtime cost (an approximation of cel-go's runtime cost units, which the
apiserver charges against its per-expression and per-policy budgets):
inside `with Meter() as m:` every evaluation in this thread adds to
m.cost: 1 per identifier, field selection, index, has(), function or
operator call and comprehension iteration; 10 per list literal (and per
list a filter/map builds), 30 per map literal; string functions and
string equality/concatenation add ceil(0.1 * length); `in` on a list and
equality of lists or maps add their size. Literals, && || and ?: cost
nothing themselves. A variable is evaluated (and charged) once.
"""

import math
import re
import threading

from . import quantity as qty

MAX_EXPR_LEN = 10 * 1024
MAX_DEPTH = 64


_METER = threading.local()


class Meter:
    """Accumulate the runtime cost of evaluations in this thread (nested
    meters both count)."""

    def __init__(self):
        self.cost = 0
        self.outer = None

    def __enter__(self):
        self.outer = getattr(_METER, "m", None)
        _METER.m = self
        return self

    def __exit__(self, *exc):
        _METER.m = self.outer
        if self.outer is not None:
            self.outer.cost += self.cost
        return False


def _charge(n):
    """Add N cost units to the active meter, if any."""
    m = getattr(_METER, "m", None)
    if m is not None:
        m.cost += n


def _size_cost(v):
    """ceil(0.1 * length) of a string; the element count of a list or
    map; 0 otherwise."""
    if isinstance(v, str):
        return math.ceil(0.1 * len(v))
    if isinstance(v, (list, dict)):
        return len(v)
    return 0


_STRING_FUNCS = frozenset(("contains", "startsWith", "endsWith", "matches",
                           "split", "join", "lowerAscii", "upperAscii",
                           "trim", "replace", "indexOf", "lastIndexOf",
                           "substring"))


class CelError(Exception):
    """A compile (syntax/type) or runtime evaluation error."""


class CelSyntaxError(CelError):
    """The expression does not parse."""


_TOKEN_RE = re.compile(r"""
    (?P<ws>\s+)
  | (?P<float>[0-9]+\.[0-9]+(?:[eE][+-]?[0-9]+)?)
  | (?P<int>0[xX][0-9a-fA-F]+u?|[0-9]+u?)
  | (?P<str>[rR]?(?:"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>&&|\|\||==|!=|<=|>=|[<>!?:.,()\[\]{}+\-*/%])
""", re.VERBOSE)

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'",
            '"': '"', "a": "\a", "b": "\b", "f": "\f", "v": "\v",
            "`": "`", "?": "?"}
RESERVED = {"as", "break", "const", "continue", "else", "for", "function",
            "if", "import", "let", "loop", "package", "namespace",
            "return", "var", "void", "while"}


def _unquote(tok):
    """Decode a CEL string literal token."""
    raw = tok[0] in "rR"
    body = tok[2:-1] if raw else tok[1:-1]
    if raw:
        return body
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[nxt]
            digits = body[i + 2:i + 2 + width]
            if len(digits) != width or not re.fullmatch(r"[0-9a-fA-F]+",
                                                        digits):
                raise CelSyntaxError("invalid escape sequence")
            out.append(chr(int(digits, 16)))
            i += 2 + width
        else:
            raise CelSyntaxError("invalid escape sequence \\%s" % nxt)
    return "".join(out)


def tokenize(text):
    """Split TEXT into (kind, value, offset) tokens."""
    toks, pos = [], 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if not m:
            raise CelSyntaxError("Syntax error: token recognition error at: "
                                 "'%s' (offset %d)" % (text[pos], pos))
        kind = m.lastgroup
        val = m.group(kind)
        if kind == "str":
            toks.append(("lit", _unquote(val), pos))
        elif kind == "int":
            unsigned = val.endswith("u")
            num = int(val.rstrip("u"), 0)
            if (unsigned and num >= 2**64) or (not unsigned and
                                                num >= 2**63):
                raise CelSyntaxError("integer literal out of range")
            toks.append(("lit", num, pos))
        elif kind == "float":
            toks.append(("lit", float(val), pos))
        elif kind == "ident":
            if val in ("true", "false"):
                toks.append(("lit", val == "true", pos))
            elif val == "null":
                toks.append(("lit", None, pos))
            elif val == "in":
                toks.append(("op", "in", pos))
            else:
                toks.append(("ident", val, pos))
        elif kind == "op":
            toks.append(("op", val, pos))
        pos = m.end()
    toks.append(("eof", None, pos))
    return toks


class _Parser:
    """Recursive-descent parser producing tuples: (node-kind, ...)."""

    def __init__(self, text):
        self.toks = tokenize(text)
        self.i = 0
        self.depth = 0

    def peek(self, value=None):
        """The next token (kind, value), or whether it is operator VALUE."""
        kind, val, _ = self.toks[self.i]
        if value is None:
            return kind, val
        return kind == "op" and val == value

    def take(self, value=None):
        """Consume the next token, which must be operator VALUE if given."""
        kind, val, pos = self.toks[self.i]
        if value is not None and not (kind == "op" and val == value):
            got = "end of input" if kind == "eof" else repr(val)
            raise CelSyntaxError("Syntax error: expected '%s' at offset %d, "
                                 "got %s" % (value, pos, got))
        self.i += 1
        return val

    def nest(self):
        """Count one level of nesting; refuse absurdly deep expressions."""
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise CelSyntaxError("expression nested too deeply")

    def parse(self):
        """The whole expression; trailing tokens are an error."""
        node = self.expr()
        kind, val, pos = self.toks[self.i]
        if kind != "eof":
            raise CelSyntaxError("Syntax error: unexpected %r at offset %d"
                                 % (val, pos))
        return node

    def expr(self):
        """expr := or-expr ['?' or-expr ':' expr]."""
        self.nest()
        cond = self.binary(0)
        if self.peek("?"):
            self.take("?")
            a = self.binary(0)
            self.take(":")
            b = self.expr()
            cond = ("cond", cond, a, b)
        self.depth -= 1
        return cond

    LEVELS = [("||",), ("&&",), ("==", "!=", "<", "<=", ">", ">=", "in"),
              ("+", "-"), ("*", "/", "%")]

    def binary(self, level):
        """Left-associative binary operators of precedence LEVEL and up."""
        if level == len(self.LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while True:
            kind, val = self.peek()
            if kind != "op" or val not in self.LEVELS[level]:
                return left
            self.take()
            right = self.binary(level + 1)
            if val == "||":
                left = ("or", left, right)
            elif val == "&&":
                left = ("and", left, right)
            else:
                left = ("bin", val, left, right)

    def unary(self):
        """Prefix ! and -."""
        kind, val = self.peek()
        if kind == "op" and val in ("!", "-"):
            self.take()
            self.nest()
            node = ("not" if val == "!" else "neg", self.unary())
            self.depth -= 1
            return node
        return self.member()

    def member(self):
        """Field selection, method calls and indexing after a primary."""
        node = self.primary()
        while True:
            if self.peek("."):
                self.take(".")
                if self.peek("?"):
                    self.take("?")
                    kind, name = self.peek()
                    if kind != "ident":
                        raise CelSyntaxError("Syntax error: expected field "
                                             "name")
                    self.take()
                    node = ("optselect", node, name)
                    continue
                kind, name = self.peek()
                if kind != "ident":
                    raise CelSyntaxError("Syntax error: expected field name")
                self.take()
                if self.peek("("):
                    node = self._macro(name, node, self.args())
                else:
                    node = ("select", node, name)
            elif self.peek("["):
                self.take("[")
                opt = self.peek("?")
                if opt:
                    self.take("?")
                idx = self.expr()
                self.take("]")
                node = ("optindex" if opt else "index", node, idx)
            else:
                return node

    MACROS = {"all": (2,), "exists": (2,), "exists_one": (2,),
              "filter": (2,), "map": (2, 3)}

    def _macro(self, name, target, args):
        """A receiver call, or a comprehension macro when NAME is one."""
        if name not in self.MACROS or not args or args[0][0] != "ident":
            return ("call", name, target, args)
        if len(args) not in self.MACROS[name]:
            raise CelSyntaxError("Syntax error: %s() macro takes %s "
                                 "arguments" % (name, " or ".join(
                                     str(n) for n in self.MACROS[name])))
        return ("macro", name, target, args[0][1], args[1:])

    def _message_name(self):
        """Message construction `A.B.C{field: expr, ...}` (CEL's
        CreateMessage: a qualified name then braces), or None when the
        identifier here does not start one."""
        j = self.i + 1
        names = [self.toks[self.i][1]]
        while self.toks[j][0] == "op" and self.toks[j][1] == "." and \
                self.toks[j + 1][0] == "ident":
            names.append(self.toks[j + 1][1])
            j += 2
        if not (self.toks[j][0] == "op" and self.toks[j][1] == "{"):
            return None
        self.i = j + 1
        self.nest()
        fields = []
        seen = set()
        while not self.peek("}"):
            opt = self.peek("?")
            if opt:
                self.take("?")
            kind, name = self.peek()
            if kind != "ident":
                raise CelSyntaxError("Syntax error: expected field name at "
                                     "offset %d" % self.toks[self.i][2])
            self.take()
            self.take(":")
            if name in seen:
                raise CelSyntaxError("Syntax error: field %s repeated"
                                     % name)
            seen.add(name)
            fields.append((name, self.expr(), opt))
            if not self.peek(","):
                break
            self.take(",")
        self.take("}")
        self.depth -= 1
        return ("msg", ".".join(names), fields)

    def args(self):
        """A parenthesised argument list."""
        self.take("(")
        out = []
        if not self.peek(")"):
            out.append(self.expr())
            while self.peek(","):
                self.take(",")
                out.append(self.expr())
        self.take(")")
        return out

    def primary(self):
        """Literals, identifiers, global calls, (expr) and [list]."""
        kind, val = self.peek()
        if kind == "lit":
            self.take()
            return ("lit", val)
        if kind == "ident":
            if val in RESERVED:
                # Reserved words are fine as field names (x.namespace),
                # not as identifiers.
                raise CelSyntaxError("reserved identifier: %s" % val)
            msg = self._message_name()
            if msg is not None:
                return msg
            self.take()
            if self.peek("("):
                args = self.args()
                if val == "has":
                    if len(args) != 1 or args[0][0] != "select":
                        raise CelSyntaxError("invalid argument to has() "
                                             "macro")
                    return ("has", args[0][1], args[0][2])
                return ("call", val, None, args)
            return ("ident", val)
        if self.peek("{"):
            self.take("{")
            entries = []
            while not self.peek("}"):
                k = self.expr()
                self.take(":")
                entries.append((k, self.expr()))
                if not self.peek(","):
                    break
                self.take(",")
            self.take("}")
            return ("map", entries)
        if self.peek("("):
            self.take("(")
            node = self.expr()
            self.take(")")
            return node
        if self.peek("["):
            self.take("[")
            items = []
            if not self.peek("]"):
                items.append(self.expr())
                while self.peek(","):
                    self.take(",")
                    items.append(self.expr())
            self.take("]")
            return ("list", items)
        pos = self.toks[self.i][2]
        what = "end of input" if kind == "eof" else repr(val)
        raise CelSyntaxError("Syntax error: unexpected %s at offset %d"
                             % (what, pos))


class Semver:
    """A semantic version value (DeviceAttribute.version)."""

    _RE = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
                     r"(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")

    def __init__(self, text):
        m = self._RE.match(text) if isinstance(text, str) else None
        if not m:
            raise CelError("invalid semver: %r" % (text,))
        self.text = text
        self.core = tuple(int(x) for x in m.group(1, 2, 3))
        self.pre = m.group(4)

    def key(self):
        """Ordering key: a pre-release sorts before its release."""
        pre = () if self.pre is None else tuple(
            (0, int(p), "") if p.isdigit() else (1, 0, p)
            for p in self.pre.split("."))
        return (self.core, self.pre is None, pre)

    def compare(self, other):
        """-1, 0 or 1 by semantic version precedence."""
        a, b = self.key(), other.key()
        return -1 if a < b else (1 if a > b else 0)

    def __eq__(self, other):
        return isinstance(other, Semver) and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())


class Device:
    """The `device` variable: driver plus attributes/capacity by domain."""

    def __init__(self, driver, attributes, capacity):
        self.driver = driver
        self.attributes = attributes
        self.capacity = capacity

    @classmethod
    def from_slice(cls, driver, dev):
        """Build from a v1 ResourceSlice device entry.

        Unqualified names belong to the driver's domain; a qualified name
        "domain/name" goes to its own domain.
        """
        attrs, caps = {}, {}
        for name, val in (dev.get("attributes") or {}).items():
            dom, _, short = name.rpartition("/")
            attrs.setdefault(dom or driver, {})[short] = _attr_value(val)
        for name, val in (dev.get("capacity") or {}).items():
            dom, _, short = name.rpartition("/")
            raw = val.get("value") if isinstance(val, dict) else val
            caps.setdefault(dom or driver, {})[short] = qty.parse(raw)
        return cls(driver, attrs, caps)


def _attr_value(val):
    """The CEL value of one DeviceAttribute {int|bool|string|version}."""
    if not isinstance(val, dict) or len(val) != 1:
        raise CelError("invalid device attribute %r" % (val,))
    kind, v = next(iter(val.items()))
    if kind == "version":
        return Semver(v)
    if kind in ("int", "bool", "string"):
        return v
    raise CelError("invalid device attribute kind %r" % kind)


class _DomainMap:
    """device.attributes / device.capacity: unknown domains are empty."""

    def __init__(self, domains):
        self.domains = domains

    def get(self, key):
        """The attribute map of domain KEY (empty when unknown)."""
        if not isinstance(key, str):
            raise CelError("no such overload: map[string]... index %s"
                           % _type(key))
        return self.domains.get(key, {})


def _type(v):
    """CEL type name of a value, for messages."""
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, Message):
        return v.type_name
    for t, name in ((str, "string"), (float, "double"), (list, "list"),
                    (dict, "map"), (_DomainMap, "map"), (Variables, "map"),
                    (Optional, "optional_type"),
                    (qty.Quantity, "kubernetes.Quantity"),
                    (Semver, "kubernetes.Semver"), (Device, "device")):
        if isinstance(v, t):
            return name
    return "null_type" if v is None else type(v).__name__


class Message(dict):
    """A constructed message value, `Object.spec{...}` or `JSONPatch{...}`
    of MutatingAdmissionPolicy (a map of its set fields that knows its
    type name)."""

    __slots__ = ("type_name",)

    def __init__(self, type_name, fields=()):
        super().__init__(fields)
        self.type_name = type_name


def plain(v):
    """V with every Message turned into a plain dict (JSON)."""
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, Optional):
        return plain(v.value) if v.present else None
    return v


def escape_key(key):
    """jsonpatch.escapeKey: a JSON Pointer reference token (~ as ~0, / as
    ~1)."""
    return key.replace("~", "~0").replace("/", "~1")


# Functions of a package (`ns.fn(args)`), besides optional.*
_PACKAGE_FUNCS = {("jsonpatch", "escapeKey"): 1}

OPTIONAL_FUNCS = ("of", "none", "ofNonZeroValue")


class Optional:
    """A CEL optional value (optional.of(x) / optional.none())."""

    def __init__(self, value=None, present=True):
        self.value = value
        self.present = present

    def __eq__(self, other):
        return isinstance(other, Optional) and \
            self.present == other.present and \
            (not self.present or _eq(self.value, other.value))


NONE = Optional(None, False)


def _optional_function(name, args):
    """optional.of(x), optional.none(), optional.ofNonZeroValue(x)."""
    if name == "of" and len(args) == 1:
        return Optional(args[0])
    if name == "none" and not args:
        return NONE
    if name == "ofNonZeroValue" and len(args) == 1:
        v = args[0]
        zero = v is None or v is False or (
            not isinstance(v, bool) and v in (0, 0.0, "")) or (
            isinstance(v, (list, dict)) and not v)
        return NONE if zero else Optional(v)
    raise CelError("found no matching overload for 'optional.%s'" % name)


def _opt_access(target, key):
    """x.?f and x[?k]: optional.of the value, none when absent."""
    if isinstance(target, Optional):
        if not target.present:
            return target
        target = target.value
    if isinstance(target, dict):
        return Optional(target[key]) if key in target else NONE
    if isinstance(target, list):
        if isinstance(key, int) and not isinstance(key, bool):
            return Optional(target[key]) if 0 <= key < len(target) \
                else NONE
        raise CelError("unsupported index type '%s' in list" % _type(key))
    if isinstance(target, Variables):
        return Optional(target.get(key)) if key in target.exprs else NONE
    raise CelError("no such overload: %s.?%s" % (_type(target), key))


class _Err:
    """A deferred evaluation error, so && / || can absorb it."""

    def __init__(self, exc):
        self.exc = exc


def _cmp(a, b, op):
    """Ordering comparison between values of one comparable type."""
    ta, tb = _type(a), _type(b)
    numeric = ("int", "double")
    if ta == tb and ta in ("int", "double", "string", "bool"):
        c = (a > b) - (a < b)
    elif ta in numeric and tb in numeric:
        c = (a > b) - (a < b)
    elif ta == tb and ta in ("kubernetes.Quantity", "kubernetes.Semver"):
        c = a.compare(b)
    else:
        raise CelError("no such overload: %s %s %s" % (ta, op, tb))
    return {"<": c < 0, "<=": c <= 0, ">": c > 0, ">=": c >= 0}[op]


def _eq(a, b):
    """CEL heterogeneous equality: different types are simply unequal."""
    ta, tb = _type(a), _type(b)
    if ta in ("int", "double") and tb in ("int", "double"):
        return a == b
    if ta != tb:
        return False
    if ta == "list":
        return len(a) == len(b) and all(_eq(x, y) for x, y in zip(a, b))
    if ta == "map" and isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_eq(a[k], b[k]) for k in a)
    return a == b


def _method(name, target, args):
    """Receiver-style functions: quantity, semver and string methods."""
    t = _type(target)
    if t == "optional_type":
        if name == "hasValue" and not args:
            return target.present
        if name == "value" and not args:
            if not target.present:
                raise CelError("optional.none() dereference")
            return target.value
        if name == "orValue" and len(args) == 1:
            return target.value if target.present else args[0]
        if name == "or" and len(args) == 1 and \
                isinstance(args[0], Optional):
            return target if target.present else args[0]
    if t in ("kubernetes.Quantity", "kubernetes.Semver"):
        if name in ("compareTo", "isGreaterThan", "isLessThan"):
            if len(args) != 1 or _type(args[0]) != t:
                raise CelError("no such overload: %s.%s(%s)" % (
                    t, name, ", ".join(_type(a) for a in args)))
            c = target.compare(args[0])
            return {"compareTo": c, "isGreaterThan": c > 0,
                    "isLessThan": c < 0}[name]
        if t == "kubernetes.Quantity" and not args:
            if name == "isInteger":
                return target.is_integer()
            if name == "asInteger":
                if not target.is_integer() or abs(target.value) >= 2**63:
                    raise CelError("cannot convert value to integer")
                return int(target.value)
            if name == "asApproximateFloat":
                return float(target.value)
            if name == "sign":
                return (target.value > 0) - (target.value < 0)
        if t == "kubernetes.Quantity" and name in ("add", "sub") \
                and len(args) == 1:
            other = args[0]
            if isinstance(other, int) and not isinstance(other, bool):
                other = qty.Quantity(other)
            if _type(other) != t:
                raise CelError("no such overload: Quantity.%s" % name)
            return target + other if name == "add" else target - other
        if t == "kubernetes.Semver" and not args and name in (
                "major", "minor", "patch"):
            return target.core[("major", "minor", "patch").index(name)]
    if t == "string" and len(args) == 1 and isinstance(args[0], str):
        if name == "startsWith":
            return target.startswith(args[0])
        if name == "endsWith":
            return target.endswith(args[0])
        if name == "contains":
            return args[0] in target
        if name == "matches":
            try:
                return re.search(args[0], target) is not None
            except re.error as e:
                raise CelError("invalid regex: %s" % e)
    if t == "string":
        v = _string_method(name, target, args)
        if v is not _NONE:
            return v
    if t == "list" and name == "join" and len(args) <= 1 and \
            all(isinstance(a, str) for a in args):
        if not all(isinstance(x, str) for x in target):
            raise CelError("join: list must contain only strings")
        return (args[0] if args else "").join(target)
    if t == "list" and name in ("indexOf", "lastIndexOf") and \
            len(args) == 1:
        # the Kubernetes list library: -1 when absent
        _charge(len(target))
        idx = [i for i, x in enumerate(target) if _eq(x, args[0])]
        if not idx:
            return -1
        return idx[0] if name == "indexOf" else idx[-1]
    if name == "size" and not args:
        return _size(target)
    raise CelError("found no matching overload for '%s' applied to '%s'"
                   % (name, t))


_NONE = object()


def _string_method(name, s, args):
    """The Kubernetes CEL string library (ASCII case mapping, split, join
    ...); _NONE when NAME(ARGS) is not one of them."""
    types = tuple(_type(a) for a in args)
    if name == "lowerAscii" and not args:
        return "".join(c.lower() if c.isascii() else c for c in s)
    if name == "upperAscii" and not args:
        return "".join(c.upper() if c.isascii() else c for c in s)
    if name == "trim" and not args:
        return s.strip()
    if name == "split" and types in (("string",), ("string", "int")):
        n = args[1] if len(args) == 2 else -1
        if n == 0:
            return []
        if args[0] == "":
            parts = list(s)
            if n > 0 and len(parts) > n:
                parts = parts[:n - 1] + ["".join(parts[n - 1:])]
            return parts
        return s.split(args[0], n - 1 if n > 0 else -1)
    if name == "replace" and types in (("string", "string"),
                                       ("string", "string", "int")):
        n = args[2] if len(args) == 3 else -1
        return s.replace(args[0], args[1], n)
    if name in ("indexOf", "lastIndexOf") and types in (
            ("string",), ("string", "int")):
        if len(args) == 2 and not 0 <= args[1] <= len(s):
            raise CelError("index out of range: %d" % args[1])
        if name == "indexOf":
            return s.find(args[0], args[1] if len(args) == 2 else 0)
        return s.rfind(args[0], 0, (args[1] + len(args[0]))
                       if len(args) == 2 else len(s))
    if name == "substring" and types in (("int",), ("int", "int")):
        end = args[1] if len(args) == 2 else len(s)
        if not 0 <= args[0] <= end <= len(s):
            raise CelError("index out of range: %d" % (
                args[0] if not 0 <= args[0] <= len(s) else end))
        return s[args[0]:end]
    return _NONE


def _size(v):
    """size() of a string, list or map."""
    if isinstance(v, (str, list, dict)):
        return len(v)
    raise CelError("no such overload: size(%s)" % _type(v))


def _function(name, args):
    """Global functions."""
    if name == "quantity" and len(args) == 1 and isinstance(args[0], str):
        try:
            return qty.parse(args[0])
        except qty.QuantityError as e:
            raise CelError("quantity: %s" % e)
    if name == "semver" and len(args) == 1 and isinstance(args[0], str):
        return Semver(args[0])
    if name == "isQuantity" and len(args) == 1 and isinstance(args[0], str):
        try:
            qty.parse(args[0])
            return True
        except qty.QuantityError:
            return False
    if name == "size" and len(args) == 1:
        return _size(args[0])
    if name == "dyn" and len(args) == 1:
        return args[0]
    if name == "string" and len(args) == 1:
        v = args[0]
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (str, int, float)):
            return v if isinstance(v, str) else repr(v)
        raise CelError("no such overload: string(%s)" % _type(v))
    if name == "int" and len(args) == 1:
        v = args[0]
        try:
            if isinstance(v, str):
                return int(v, 10)
            if isinstance(v, float) and not isinstance(v, bool):
                return int(v)
        except (ValueError, OverflowError):
            raise CelError("cannot convert %r to int" % (v,))
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        raise CelError("no such overload: int(%s)" % _type(v))
    if name == "double" and len(args) == 1:
        v = args[0]
        try:
            if isinstance(v, (str, int, float)) and not isinstance(v, bool):
                return float(v)
        except ValueError:
            raise CelError("cannot convert %r to double" % (v,))
        raise CelError("no such overload: double(%s)" % _type(v))
    raise CelError("undeclared reference to '%s' (in container '')" % name)


class Variables:
    """The `variables` of a policy: evaluated lazily, once, by name.

    EXPRS maps a name to (Program, index); a variable may only use the
    variables declared before it (the apiserver's composition order).
    """

    def __init__(self, exprs, env):
        self.exprs = exprs
        self.env = env
        self.values = {}

    def get(self, name):
        """The value of variable NAME (a CelError if it fails)."""
        if name in self.values:
            v = self.values[name]
        else:
            if name not in self.exprs:
                raise CelError("no such key: %s" % name)
            prog = self.exprs[name]
            v = prog._eval(prog.ast, self.env)
            self.values[name] = v
        if isinstance(v, _Err):
            raise v.exc
        return v


class Program:
    """A compiled expression; evaluate() with a Device, evaluate_in()
    with an environment (dict of variable name -> value)."""

    def __init__(self, text, declared=("device",), variables=None,
                 types=()):
        """DECLARED: the names the expression may use; VARIABLES: the
        names `variables.<name>` may select (None: any); TYPES: the
        message types it may construct (`Object` covers `Object.a.b`)."""
        if not isinstance(text, str):
            raise CelSyntaxError("expression must be a string")
        if len(text) > MAX_EXPR_LEN:
            raise CelSyntaxError("expression too long (%d > %d)"
                                 % (len(text), MAX_EXPR_LEN))
        self.text = text
        self.declared = frozenset(declared)
        self.variables = variables
        self.types = frozenset(types)
        self.ast = _Parser(text).parse()
        self._check(self.ast, frozenset())

    def _check(self, node, scope):
        """Reject undeclared identifiers (and unknown variables) at
        compile time; macro variables are in scope in their bodies."""
        kind = node[0]
        if kind == "call" and node[2] == ("ident", "optional") and \
                node[1] in OPTIONAL_FUNCS and "optional" not in scope:
            for a in node[3]:
                self._check(a, scope)
            return
        if kind == "call" and node[2] is not None and \
                node[2][0] == "ident" and \
                (node[2][1], node[1]) in _PACKAGE_FUNCS and \
                node[2][1] not in scope and node[2][1] not in self.declared \
                and "Object" in self.types:
            for a in node[3]:
                self._check(a, scope)
            return
        if kind == "msg":
            if node[1].split(".")[0] not in self.types:
                raise CelSyntaxError("undeclared reference to '%s' (in "
                                     "container '')" % node[1])
            if node[1] == "JSONPatch":
                for f, _, _ in node[2]:
                    if f not in ("op", "path", "from", "value"):
                        raise CelSyntaxError("undefined field '%s'" % f)
            for _, e, _ in node[2]:
                self._check(e, scope)
            return
        if kind == "ident":
            if node[1] not in self.declared and node[1] not in scope:
                raise CelSyntaxError("undeclared reference to '%s' "
                                     "(in container '')" % node[1])
            return
        if kind == "lit":
            return
        if kind in ("select", "has") and node[1][0] == "ident" and \
                node[1][1] == "variables" and "variables" not in scope \
                and self.variables is not None and \
                node[2] not in self.variables:
            raise CelSyntaxError("undefined field '%s'" % node[2])
        if kind == "macro":
            self._check(node[2], scope)
            inner = scope | {node[3]}
            for n in node[4]:
                self._check(n, inner)
            return
        if kind == "map":
            for k, v in node[1]:
                self._check(k, scope)
                self._check(v, scope)
            return
        for child in node[1:]:
            if isinstance(child, tuple):
                self._check(child, scope)
            elif isinstance(child, list):
                for c in child:
                    if isinstance(c, tuple):
                        self._check(c, scope)

    def evaluate(self, device):
        """Return the expression's value; raise CelError on error."""
        return self.evaluate_in({"device": device})

    def evaluate_in(self, env):
        """Evaluate with ENV (name -> value); raise CelError on error."""
        v = self._eval(self.ast, env)
        if isinstance(v, _Err):
            raise v.exc
        return v

    def matches(self, device):
        """Evaluate a selector: the result must be a bool."""
        v = self.evaluate(device)
        if not isinstance(v, bool):
            raise CelError("expression must evaluate to bool, got %s"
                           % _type(v))
        return v

    def _eval(self, node, env):
        """Evaluate NODE, returning a value or an _Err for && and ||."""
        try:
            return self._eval_raise(node, env)
        except CelError as e:
            return _Err(e)
        except (ZeroDivisionError, OverflowError) as e:
            return _Err(CelError(str(e)))

    def _value(self, node, env):
        """Evaluate NODE and raise if it is an error."""
        v = self._eval(node, env)
        if isinstance(v, _Err):
            raise v.exc
        return v

    def _logic(self, node, env):
        """&& and || with CEL's commutative error absorption."""
        op = node[0]
        decisive = op == "or"
        vals = [self._eval(node[1], env), self._eval(node[2], env)]
        err = None
        for v in vals:
            if isinstance(v, _Err):
                err = err or v
            elif not isinstance(v, bool):
                err = err or _Err(CelError("no such overload: %s %s"
                                           % (_type(v), op)))
            elif v == decisive:
                return decisive
        if err:
            raise err.exc
        return not decisive

    def _macro(self, node, env):
        """all / exists / exists_one / filter / map over a list or the
        keys of a map.  all and exists absorb errors as && and || do."""
        name, target, var, body = node[1], node[2], node[3], node[4]
        rng = self._value(target, env)
        if isinstance(rng, dict):
            items = list(rng.keys())
        elif isinstance(rng, list):
            items = rng
        else:
            raise CelError("no such overload: %s.%s()" % (_type(rng), name))
        local = dict(env)
        err = None
        out = []
        count = 0
        if name in ("filter", "map"):
            _charge(10)
        for x in items:
            local[var] = x
            _charge(1)
            if name in ("all", "exists"):
                v = self._eval(body[0], local)
                if isinstance(v, _Err):
                    err = err or v
                    continue
                if not isinstance(v, bool):
                    err = err or _Err(CelError("no such overload: %s %s"
                                               % (name, _type(v))))
                    continue
                if v == (name == "exists"):
                    return v
            elif name == "exists_one":
                v = self._value(body[0], local)
                if not isinstance(v, bool):
                    raise CelError("no such overload: exists_one %s"
                                   % _type(v))
                count += v
            elif name == "filter":
                v = self._value(body[0], local)
                if not isinstance(v, bool):
                    raise CelError("no such overload: filter %s" % _type(v))
                if v:
                    out.append(x)
            else:
                if len(body) == 2:
                    keep = self._value(body[0], local)
                    if not isinstance(keep, bool):
                        raise CelError("no such overload: map %s"
                                       % _type(keep))
                    if not keep:
                        continue
                out.append(self._value(body[-1], local))
        if name in ("all", "exists"):
            if err:
                raise err.exc
            return name == "all"
        if name == "exists_one":
            return count == 1
        return out

    def _has(self, node, env):
        """has(x.f): whether map X has key F (objects: field F is set)."""
        target = self._value(node[1], env)
        if isinstance(target, dict):
            return node[2] in target
        if isinstance(target, Variables):
            return node[2] in target.exprs
        if isinstance(target, Device):
            return node[2] in ("driver", "attributes", "capacity")
        if isinstance(target, _DomainMap):
            return node[2] in target.domains
        raise CelError("invalid type for field selection: %s"
                       % _type(target))

    def _eval_raise(self, node, env):
        """Evaluate NODE; raise CelError on error."""
        kind = node[0]
        if kind == "lit":
            return node[1]
        if kind in ("ident", "select", "index", "has", "not", "neg"):
            _charge(1)
        elif kind == "list":
            _charge(10)
        elif kind == "map":
            _charge(30)
        if kind == "ident":
            try:
                return env[node[1]]
            except KeyError:
                raise CelError("undeclared reference to '%s'" % node[1])
        if kind == "select":
            return self._select(self._value(node[1], env), node[2])
        if kind in ("and", "or"):
            return self._logic(node, env)
        if kind == "not":
            v = self._value(node[1], env)
            if not isinstance(v, bool):
                raise CelError("no such overload: !%s" % _type(v))
            return not v
        if kind == "neg":
            v = self._value(node[1], env)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise CelError("no such overload: -%s" % _type(v))
            return -v
        if kind == "cond":
            c = self._value(node[1], env)
            if not isinstance(c, bool):
                raise CelError("no such overload: %s ? _ : _" % _type(c))
            return self._value(node[2] if c else node[3], env)
        if kind == "list":
            return [self._value(n, env) for n in node[1]]
        if kind == "map":
            out = {}
            for k, v in node[1]:
                key = self._value(k, env)
                if not isinstance(key, (str, int)):
                    raise CelError("unsupported key type: %s" % _type(key))
                if key in out:
                    raise CelError("Failed with repeated key")
                out[key] = self._value(v, env)
            return out
        if kind == "index":
            return self._index(self._value(node[1], env),
                               self._value(node[2], env))
        if kind == "call":
            args = [self._value(a, env) for a in node[3]]
            _charge(1)
            if node[2] is None:
                return _function(node[1], args)
            if node[2] == ("ident", "optional") and "optional" not in env:
                return _optional_function(node[1], args)
            if node[2][0] == "ident" and node[2][1] not in env and \
                    (node[2][1], node[1]) in _PACKAGE_FUNCS:
                if len(args) != 1 or not isinstance(args[0], str):
                    raise CelError("found no matching overload for '%s.%s'"
                                   % (node[2][1], node[1]))
                _charge(math.ceil(0.1 * len(args[0])))
                return escape_key(args[0])
            target = self._value(node[2], env)
            if node[1] in _STRING_FUNCS:
                _charge(sum(math.ceil(0.1 * len(x)) for x in [target] + args
                            if isinstance(x, str)) +
                        (len(target) if isinstance(target, list) else 0))
            return _method(node[1], target, args)
        if kind in ("optselect", "optindex"):
            target = self._value(node[1], env)
            key = node[2] if kind == "optselect" else \
                self._value(node[2], env)
            return _opt_access(target, key)
        if kind == "macro":
            return self._macro(node, env)
        if kind == "msg":
            _charge(40)
            out = Message(node[1])
            for f, e, opt in node[2]:
                v = self._value(e, env)
                if opt:
                    if not isinstance(v, Optional):
                        raise CelError("no such overload: optional field "
                                       "%s of %s" % (f, _type(v)))
                    if not v.present:
                        continue
                    v = v.value
                out[f] = v
            return out
        if kind == "has":
            return self._has(node, env)
        if kind == "bin":
            a, b = self._value(node[2], env), self._value(node[3], env)
            op = node[1]
            _charge(1)
            if op in ("==", "!="):
                _charge(min(_size_cost(a), _size_cost(b)))
            elif op == "in" and isinstance(b, list):
                _charge(len(b))
            elif op == "+" and isinstance(a, str) and isinstance(b, str):
                _charge(math.ceil(0.1 * (len(a) + len(b))))
            return self._binary(op, a, b)
        raise CelError("internal: unknown node %r" % (kind,))

    @staticmethod
    def _select(target, name):
        """Field selection: device fields or map keys."""
        if isinstance(target, Optional):
            if not target.present:
                return target
            return Optional(Program._select(target.value, name))
        if isinstance(target, Device):
            if name == "driver":
                return target.driver
            if name == "attributes":
                return _DomainMap(target.attributes)
            if name == "capacity":
                return _DomainMap(target.capacity)
            raise CelError("no such key: %s" % name)
        if isinstance(target, _DomainMap):
            return target.get(name)
        if isinstance(target, Variables):
            return target.get(name)
        if isinstance(target, dict):
            if name not in target:
                raise CelError("no such key: %s" % name)
            return target[name]
        raise CelError("type '%s' does not support field selection"
                       % _type(target))

    @staticmethod
    def _index(target, key):
        """Indexing: map[key] or list[int]."""
        if isinstance(target, Optional):
            if not target.present:
                return target
            return Optional(Program._index(target.value, key))
        if isinstance(target, _DomainMap):
            return target.get(key)
        if isinstance(target, dict):
            if key not in target:
                raise CelError("no such key: %s" % (key,))
            return target[key]
        if isinstance(target, list):
            if isinstance(key, bool) or not isinstance(key, int):
                raise CelError("unsupported index type '%s' in list"
                               % _type(key))
            if not 0 <= key < len(target):
                raise CelError("index out of bounds: %d" % key)
            return target[key]
        raise CelError("no such overload: %s[%s]" % (_type(target),
                                                     _type(key)))

    @staticmethod
    def _binary(op, a, b):
        """==, !=, ordering, `in` and arithmetic on ints/strings."""
        if op == "==":
            return _eq(a, b)
        if op == "!=":
            return not _eq(a, b)
        if op in ("<", "<=", ">", ">="):
            return _cmp(a, b, op)
        if op == "in":
            if isinstance(b, _DomainMap):
                if not isinstance(a, str):
                    raise CelError("no such overload: %s in map"
                                   % _type(a))
                return a in b.domains
            if isinstance(b, dict):
                return a in b
            if isinstance(b, list):
                return any(_eq(a, x) for x in b)
            raise CelError("no such overload: %s in %s"
                           % (_type(a), _type(b)))
        ta, tb = _type(a), _type(b)
        if op == "+" and ta == tb and ta in ("string", "list"):
            return a + b
        if ta == tb == "int":
            if op in ("/", "%") and b == 0:
                raise CelError("division by zero" if op == "/"
                               else "modulus by zero")
            q = abs(a) // abs(b) if b else 0
            if (a < 0) != (b < 0):
                q = -q
            r = {"+": a + b, "-": a - b, "*": a * b, "/": q,
                 "%": a - b * q}[op]
            if not -2**63 <= r < 2**63:
                raise CelError("integer overflow")
            return r
        raise CelError("no such overload: %s %s %s" % (ta, op, tb))


_CACHE = {}


def compile_expr(text):
    """Compile TEXT, memoised (selectors repeat across many devices)."""
    prog = _CACHE.get(text)
    if prog is None:
        prog = Program(text)
        if len(_CACHE) > 512:
            _CACHE.clear()
        _CACHE[text] = prog
    return prog
