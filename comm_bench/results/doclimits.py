"""What a JSON or YAML document given to comm-bench may hold: how deeply it nests and how
large its whole numbers are. Parsers and the code after them recurse and convert to
float, so a hostile document (200,000 nested '[', a 400-digit size) must be refused
here, with one line and exit 2, not end as RecursionError or OverflowError (exit 70)."""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from ..errors import UsageError
from ..printable import escape

MAX_RULES_BYTES = 1 << 20   # rules files (validate --rules, select --rules)
MAX_DEPTH = 64          # comm-bench's own documents nest < 10 deep
MAX_INT_DIGITS = 19     # |n| < 10**19: every count, size and rank fits 64 bits and a float


def too_deep(what: str, path: str) -> UsageError:
    return UsageError(f"{what} '{path}' nests lists or objects too deeply (comm-bench reads up to "
                      f"{MAX_DEPTH} levels): not a document comm-bench wrote")


def json_int(what: str, path: str) -> Callable[[str], int]:
    """A json.loads parse_int that refuses whole numbers too large for a float or 64 bits."""
    def parse(text: str) -> int:
        if len(text) > MAX_INT_DIGITS and len(text.lstrip("-")) > MAX_INT_DIGITS:
            raise _too_large(what, path, text)
        return int(text)
    return parse


# a string a terminal would act on or UTF-8 cannot hold: controls, bidirectional overrides, lone surrogates
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
# what JSON text holding such a string must contain: an escape, or one of them raw (C1, bidi)
_MAY_HOLD = re.compile(rb"\\|\xc2[\x80-\x9f]|\xe2\x80[\x8e\x8f\xaa-\xae]|\xe2\x81[\xa6-\xa9]")


def may_hold_unprintable(text: str | bytes) -> bool:
    """Cheap: False where the JSON text cannot hold a string printable() would change."""
    if isinstance(text, str):
        return "\\" in text or _UNPRINTABLE.search(text) is not None
    return _MAY_HOLD.search(text) is not None


def printable(doc: Any) -> Any:
    """`doc` with every string (keys too) holding control characters, bidirectional overrides
    or unpaired surrogates written as their \\uXXXX escapes: a host name is then the same text
    in every output (terminal, HTML, PNG, Prometheus) and can neither drive a terminal nor
    fail to encode (issue 44). Walked without recursion; changed in place where it can be."""
    def fix(v: Any) -> Any:
        return escape(v) if isinstance(v, str) and _UNPRINTABLE.search(v) else v
    if not isinstance(doc, (dict, list)):
        return fix(doc)
    stack = [doc]
    while stack:
        obj = stack.pop()
        if isinstance(obj, dict):
            if any(_UNPRINTABLE.search(k) for k in obj if isinstance(k, str)):
                items = [(fix(k), v) for k, v in obj.items()]
                obj.clear()
                obj.update(items)
            for k, v in obj.items():
                if isinstance(v, (dict, list)):
                    stack.append(v)
                elif isinstance(v, str) and _UNPRINTABLE.search(v):
                    obj[k] = escape(v)
        elif isinstance(obj, list):
            for i, v in enumerate(obj):
                if isinstance(v, (dict, list)):
                    stack.append(v)
                elif isinstance(v, str) and _UNPRINTABLE.search(v):
                    obj[i] = escape(v)
    return doc


def loads_json(text: str | bytes, what: str, path: str, walk: bool = True, **hooks: Any) -> Any:
    """json.loads, with too deep nesting and too large numbers one UsageError. walk=False
    for results documents (100,000s of records): their integers are checked as they are
    parsed, and their depth is bounded by the parser's own recursion limit (~1000), which
    is refused here too; nothing after it recurses into fields it does not know."""
    try:
        doc = json.loads(text, parse_int=json_int(what, path), **hooks)
    except RecursionError:
        raise too_deep(what, path) from None
    if walk:
        check_tree(doc, what, path)
    if may_hold_unprintable(text):
        # records_file stays as written: it names a file (checked, and refused, as it is)
        raw = doc.get("records_file") if isinstance(doc, dict) else None
        doc = printable(doc)
        if raw is not None:
            doc["records_file"] = raw
    return doc


def loads_yaml(text: str, what: str, path: str) -> Any:
    """yaml.safe_load, with too deep nesting and too large numbers one UsageError."""
    import yaml
    try:
        doc = yaml.safe_load(text)
    except RecursionError:
        raise too_deep(what, path) from None
    check_tree(doc, what, path)
    return doc


def check_tree(doc: Any, what: str, path: str) -> None:
    """UsageError if `doc` nests deeper than MAX_DEPTH or holds an integer of more than
    MAX_INT_DIGITS digits (walked without recursion)."""
    stack = [(doc, 1)]
    while stack:
        obj, depth = stack.pop()
        items: Iterable[Any]
        if isinstance(obj, dict):
            items = obj.values()
        elif isinstance(obj, list):
            items = obj
        else:
            continue
        if depth > MAX_DEPTH:
            raise too_deep(what, path)
        for v in items:
            if isinstance(v, (dict, list)):
                stack.append((v, depth + 1))
            elif isinstance(v, int) and not isinstance(v, bool) and \
                    (v >= 10 ** MAX_INT_DIGITS or v <= -10 ** MAX_INT_DIGITS):
                raise _too_large(what, path, str(v))


def _too_large(what: str, path: str, text: str) -> UsageError:
    shown = text if len(text) <= 24 else f"{text[:12]}... ({len(text.lstrip('-'))} digits)"
    return UsageError(f"{what} '{path}' holds the number {shown}, too large for comm-bench "
                      f"(at most {MAX_INT_DIGITS} digits)")
