# SPDX-License-Identifier: Apache-2.0
"""Label and field selectors as the API server parses and matches them."""

import re

from .hooks import err_bad_request

_SET_RE = re.compile(r'^\s*([A-Za-z0-9_./-]+)\s+(in|notin)\s*\((.*)\)\s*$')
_KEY_RE = re.compile(r'^([A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?/)?'
                     r'[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$')


def _split_terms(text):
    """Split a selector on commas that are not inside parentheses."""
    terms, depth, cur = [], 0, []
    for ch in text:
        if ch == '(':
            depth += 1
        elif ch == ')':
            depth -= 1
        if ch == ',' and depth == 0:
            terms.append(''.join(cur))
            cur = []
        else:
            cur.append(ch)
    terms.append(''.join(cur))
    return [t.strip() for t in terms if t.strip()]


def _check_key(key, text):
    """Reject a label key that is not a qualified name."""
    if not _KEY_RE.match(key) or len(key) > 317:
        raise err_bad_request('unable to parse requirement: invalid label '
                              'key "%s" in "%s"' % (key, text))


def parse_labels(text):
    """Parse a labelSelector string into [(key, op, [values])] or None."""
    if not text:
        return None
    reqs = []
    for term in _split_terms(text):
        m = _SET_RE.match(term)
        if m:
            vals = [v.strip() for v in m.group(3).split(',') if v.strip()]
            _check_key(m.group(1), text)
            reqs.append((m.group(1), m.group(2), vals))
            continue
        if term.startswith('!'):
            _check_key(term[1:].strip(), text)
            reqs.append((term[1:].strip(), '!', []))
            continue
        for op in ('!=', '==', '='):
            if op in term:
                k, v = term.split(op, 1)
                k, v = k.strip(), v.strip()
                _check_key(k, text)
                if any(c in v for c in '=!() '):
                    raise err_bad_request('unable to parse requirement: '
                                          'invalid label value: "%s"' % v)
                reqs.append((k, '!=' if op == '!=' else '=', [v]))
                break
        else:
            if any(c in term for c in '<> '):
                raise err_bad_request('unable to parse requirement: found '
                                      '"%s", expected: identifier' % term)
            _check_key(term, text)
            reqs.append((term, 'exists', []))
    return reqs


def match_labels(reqs, labels):
    """True when the labels dict satisfies every requirement."""
    if not reqs:
        return True
    labels = labels or {}
    for key, op, vals in reqs:
        has = key in labels
        val = labels.get(key)
        if op == '=':
            ok = has and val == vals[0]
        elif op == '!=':
            ok = not has or val != vals[0]
        elif op == 'in':
            ok = has and val in vals
        elif op == 'notin':
            ok = not has or val not in vals
        elif op == 'exists':
            ok = has
        else:
            ok = not has
        if not ok:
            return False
    return True


def match_label_selector_obj(sel, labels, unknown_op=True):
    """Match a metav1.LabelSelector dict (matchLabels/matchExpressions); no
    selector matches everything. An expression whose operator is none of
    the four matches when UNKNOWN_OP, else fails the match."""
    if not sel:
        return True
    labels = labels or {}
    for k, v in (sel.get('matchLabels') or {}).items():
        if labels.get(k) != v:
            return False
    for e in sel.get('matchExpressions') or []:
        k, op, vals = e.get('key'), e.get('operator'), e.get('values') or []
        if op == 'In' and (k not in labels or labels[k] not in vals):
            return False
        if op == 'NotIn' and k in labels and labels[k] in vals:
            return False
        if op == 'Exists' and k not in labels:
            return False
        if op == 'DoesNotExist' and k in labels:
            return False
        if not unknown_op and \
                op not in ('In', 'NotIn', 'Exists', 'DoesNotExist'):
            return False
    return True


def parse_fields(text, allowed):
    """Parse a fieldSelector into [(path, negate, value)] or None.

    allowed is the set of field labels the resource supports; others give
    400 as on the real server.
    """
    if not text:
        return None
    reqs = []
    for term in _split_terms(text):
        for op in ('!=', '==', '='):
            if op in term:
                k, v = term.split(op, 1)
                k = k.strip()
                if k not in allowed:
                    raise err_bad_request('field label not supported: %s' % k)
                reqs.append((k, op == '!=', v.strip()))
                break
        else:
            raise err_bad_request('invalid selector: \'%s\'; can\'t '
                                  'understand \'%s\'' % (text, term))
    return reqs


def field_value(obj, path):
    """The string value of a dotted field path as field selectors see it."""
    cur = obj
    for part in path.split('.'):
        if not isinstance(cur, dict):
            return ''
        cur = cur.get(part)
    if cur is None:
        return ''
    if isinstance(cur, bool):
        return 'true' if cur else 'false'
    return str(cur)


def match_fields(reqs, obj):
    """True when obj satisfies every field requirement."""
    if not reqs:
        return True
    for path, neg, val in reqs:
        if (field_value(obj, path) == val) == neg:
            return False
    return True


def match_resource_entries(entries, resource, sub):
    """Whether an admission rule's resources list ("pods", "pods/status",
    "*", "*/*", "pods/*", "*/scale") names this resource and subresource
    (sub "" for the main resource); shared by webhooks and policies."""
    for entry in entries:
        if entry == "*/*":
            return True
        er, _, es = entry.partition("/")
        if er not in ("*", resource):
            continue
        if not es and not sub:
            return True
        if es and sub and es in ("*", sub):
            return True
    return False


def rule_matches(rule, ctx, versions=True):
    """Whether a webhook's or policy's RuleWithOperations (operations,
    apiGroups, apiVersions unless not VERSIONS, scope, resources) names
    the admission request CTX."""
    ops = rule.get("operations") or []
    if "*" not in ops and ctx.operation not in ops:
        return False
    res = ctx.resource
    groups = rule.get("apiGroups") or []
    if "*" not in groups and res.group not in groups:
        return False
    if versions:
        vers = rule.get("apiVersions") or []
        if "*" not in vers and res.version not in vers:
            return False
    scope = rule.get("scope") or "*"
    if scope == "Cluster" and res.namespaced:
        return False
    if scope == "Namespaced" and not res.namespaced:
        return False
    return match_resource_entries(rule.get("resources") or [],
                                  res.resource, ctx.subresource or "")
