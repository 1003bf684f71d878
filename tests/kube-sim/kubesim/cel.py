"""A small CEL parser and evaluator for DRA device selectors.

It covers what DeviceClass and request selectors use in practice:
literals (string, int, uint, double, bool, null), the variable `device`
with `.driver`, `.attributes[domain].name` and `.capacity[domain].name`,
== != < <= > >=, `in` on maps and lists, && || ! and ?:, parentheses,
`quantity()` / `semver()` with compareTo / isGreaterThan / isLessThan,
size() and the string methods startsWith / endsWith / contains / matches.

Errors follow CEL: a reference to a missing key or field is an evaluation
error (never false), && and || absorb an error only when the other side
decides the result, and a selector must produce a bool.
"""

import re

from . import quantity as qty

MAX_EXPR_LEN = 10 * 1024
MAX_DEPTH = 64


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
            elif val in RESERVED:
                raise CelSyntaxError("reserved identifier: %s" % val)
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
                kind, name = self.peek()
                if kind != "ident":
                    raise CelSyntaxError("Syntax error: expected field name")
                self.take()
                if self.peek("("):
                    node = ("call", name, node, self.args())
                else:
                    node = ("select", node, name)
            elif self.peek("["):
                self.take("[")
                idx = self.expr()
                self.take("]")
                node = ("index", node, idx)
            else:
                return node

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
            self.take()
            if self.peek("("):
                return ("call", val, None, self.args())
            return ("ident", val)
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
    for t, name in ((str, "string"), (float, "double"), (list, "list"),
                    (dict, "map"), (_DomainMap, "map"),
                    (qty.Quantity, "kubernetes.Quantity"),
                    (Semver, "kubernetes.Semver"), (Device, "device")):
        if isinstance(v, t):
            return name
    return "null_type" if v is None else type(v).__name__


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
    return a == b


def _method(name, target, args):
    """Receiver-style functions: quantity, semver and string methods."""
    t = _type(target)
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
    if name == "size" and not args:
        return _size(target)
    raise CelError("found no matching overload for '%s' applied to '%s'"
                   % (name, t))


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
    raise CelError("undeclared reference to '%s' (in container '')" % name)


class Program:
    """A compiled expression; evaluate() with a Device."""

    def __init__(self, text):
        if not isinstance(text, str):
            raise CelSyntaxError("expression must be a string")
        if len(text) > MAX_EXPR_LEN:
            raise CelSyntaxError("expression too long (%d > %d)"
                                 % (len(text), MAX_EXPR_LEN))
        self.text = text
        self.ast = _Parser(text).parse()
        self._check(self.ast)

    def _check(self, node):
        """Reject identifiers other than `device` at compile time."""
        if node[0] == "ident" and node[1] != "device":
            raise CelSyntaxError("undeclared reference to '%s' "
                                 "(in container '')" % node[1])
        for child in node[1:]:
            if isinstance(child, tuple):
                self._check(child)
            elif isinstance(child, list):
                for c in child:
                    if isinstance(c, tuple):
                        self._check(c)

    def evaluate(self, device):
        """Return the expression's value; raise CelError on error."""
        v = self._eval(self.ast, device)
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

    def _eval(self, node, dev):
        """Evaluate NODE, returning a value or an _Err for && and ||."""
        try:
            return self._eval_raise(node, dev)
        except CelError as e:
            return _Err(e)
        except (ZeroDivisionError, OverflowError) as e:
            return _Err(CelError(str(e)))

    def _value(self, node, dev):
        """Evaluate NODE and raise if it is an error."""
        v = self._eval(node, dev)
        if isinstance(v, _Err):
            raise v.exc
        return v

    def _logic(self, node, dev):
        """&& and || with CEL's commutative error absorption."""
        op = node[0]
        decisive = op == "or"
        vals = [self._eval(node[1], dev), self._eval(node[2], dev)]
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

    def _eval_raise(self, node, dev):
        """Evaluate NODE; raise CelError on error."""
        kind = node[0]
        if kind == "lit":
            return node[1]
        if kind == "ident":
            return dev
        if kind in ("and", "or"):
            return self._logic(node, dev)
        if kind == "not":
            v = self._value(node[1], dev)
            if not isinstance(v, bool):
                raise CelError("no such overload: !%s" % _type(v))
            return not v
        if kind == "neg":
            v = self._value(node[1], dev)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise CelError("no such overload: -%s" % _type(v))
            return -v
        if kind == "cond":
            c = self._value(node[1], dev)
            if not isinstance(c, bool):
                raise CelError("no such overload: %s ? _ : _" % _type(c))
            return self._value(node[2] if c else node[3], dev)
        if kind == "list":
            return [self._value(n, dev) for n in node[1]]
        if kind == "select":
            return self._select(self._value(node[1], dev), node[2])
        if kind == "index":
            return self._index(self._value(node[1], dev),
                               self._value(node[2], dev))
        if kind == "call":
            args = [self._value(a, dev) for a in node[3]]
            if node[2] is None:
                return _function(node[1], args)
            return _method(node[1], self._value(node[2], dev), args)
        if kind == "bin":
            return self._binary(node[1], self._value(node[2], dev),
                                self._value(node[3], dev))
        raise CelError("internal: unknown node %r" % (kind,))

    @staticmethod
    def _select(target, name):
        """Field selection: device fields or map keys."""
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
        if isinstance(target, dict):
            if name not in target:
                raise CelError("no such key: %s" % name)
            return target[name]
        raise CelError("type '%s' does not support field selection"
                       % _type(target))

    @staticmethod
    def _index(target, key):
        """Indexing: map[key] or list[int]."""
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
