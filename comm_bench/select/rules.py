"""Decision rules: a YAML tree of `if` conditions over facts (facts.py) with
`then: {recommend, framework, rationale}` or nested `rules`. Defaults:
comm_bench/data/select_rules.yaml; a user file (--rules) is tried before them
(`mode: merge`, the default) or alone (`mode: replace`). Unknown keys, unknown facts and
bad expressions are errors (exit 2) when the rules load, before anything is decided."""
from __future__ import annotations

import os
import re

from ..results.doclimits import MAX_RULES_BYTES, loads_yaml
from ..errors import UsageError
from ..results.safefile import read_bounded
from . import facts as F
from .expr import Expr
from .layouts import DP_LAYOUTS

DEFAULT_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                            "select_rules.yaml")
TOP_KEYS = {"version", "mode", "rules"}
NODE_KEYS = {"name", "if", "rules", "then"}
THEN_KEYS = {"recommend", "framework", "rationale"}
SPECIAL = {"best", "megatron", "fsdp-tp", "none"}
LAYOUT_RE = re.compile(r"^(fsdp-tp:)?tp\d+(-cp\d+)?-pp\d+-dp\d+(-ep\d+)?(-etp\d+)?$")
PLACEHOLDER = re.compile(r"\{(\w+)(?::([^{}]*))?\}")


def _read(path):
    try:
        import yaml
    except ImportError:
        raise UsageError("select rules need pyyaml: pip install pyyaml") from None
    try:
        data = loads_yaml(read_bounded(path, "rules file", limit=MAX_RULES_BYTES), "rules file", path)
    except yaml.YAMLError as exc:
        raise UsageError(f"rules file '{path}' is not valid YAML: {' '.join(str(exc).split())[:140]}") from None
    if not isinstance(data, dict):
        raise UsageError(f"rules file '{path}': expected a mapping with a 'rules' list at the top level")
    return data


class Rule:
    def __init__(self, spec, where):
        if not isinstance(spec, dict):
            raise UsageError(f"{where}: a rule must be a mapping with 'if' and 'then' or 'rules'")
        unknown = set(spec) - NODE_KEYS
        if unknown:
            raise UsageError(f"{where}: unknown key '{sorted(unknown)[0]}' (known: {', '.join(sorted(NODE_KEYS))})")
        self.name = str(spec.get("name") or where.rsplit(" ", 1)[-1])
        where = f"{where} ({self.name})" if spec.get("name") else where
        if "if" not in spec:
            raise UsageError(f"{where}: missing 'if'")
        if ("then" in spec) == ("rules" in spec):
            raise UsageError(f"{where}: give exactly one of 'then' and 'rules'")
        self.cond = Expr(spec["if"], F.NAMES, where)
        self.children, self.then = None, None
        if "rules" in spec:
            self.children = parse_list(spec["rules"], where)
        else:
            self.then = _then(spec["then"], where)


def _then(t, where):
    if not isinstance(t, dict):
        raise UsageError(f"{where}: 'then' must be a mapping with 'recommend'")
    unknown = set(t) - THEN_KEYS
    if unknown:
        raise UsageError(f"{where}: unknown key 'then.{sorted(unknown)[0]}' (known: {', '.join(sorted(THEN_KEYS))})")
    rec = t.get("recommend")
    recs = rec if isinstance(rec, list) else [rec]
    for r in recs:
        if not isinstance(r, str) or not (r in SPECIAL or r in DP_LAYOUTS or LAYOUT_RE.match(r)):
            raise UsageError(f"{where}: bad recommend {r!r} (a layout: {', '.join(DP_LAYOUTS)}, tpT-ppP-dpD, "
                             "megatron, best, none; or a list of them)")
    rat = t.get("rationale", [])
    rat = [rat] if isinstance(rat, str) else rat
    if not isinstance(rat, list) or not all(isinstance(x, str) for x in rat):
        raise UsageError(f"{where}: 'rationale' must be a string or a list of strings")
    for line in rat:
        for m in PLACEHOLDER.finditer(line):
            if m.group(1) not in F.NAMES:
                raise UsageError(f"{where}: unknown fact {{{m.group(1)}}} in rationale")
            if m.group(2):
                try:
                    format(0.5, m.group(2))
                except ValueError:
                    raise UsageError(f"{where}: bad format '{m.group(2)}' for {{{m.group(1)}}}") from None
    fw = t.get("framework")
    if fw is not None and not isinstance(fw, str):
        raise UsageError(f"{where}: 'framework' must be a string")
    return {"recommend": recs, "framework": fw, "rationale": rat}


def parse_list(items, where):
    if not isinstance(items, list):
        raise UsageError(f"{where}: 'rules' must be a list")
    return [Rule(s, f"{where}: rule {i + 1}") for i, s in enumerate(items)]


def parse(data, path):
    unknown = set(data) - TOP_KEYS
    if unknown:
        raise UsageError(f"rules file '{path}': unknown key '{sorted(unknown)[0]}' (known: {', '.join(sorted(TOP_KEYS))})")
    if data.get("version", 1) != 1:
        raise UsageError(f"rules file '{path}': version {data.get('version')!r} is not supported (1)")
    mode = data.get("mode", "merge")
    if mode not in ("merge", "replace"):
        raise UsageError(f"rules file '{path}': mode must be merge or replace (got {mode!r})")
    return mode, parse_list(data.get("rules", []), f"rules file '{path}'")


def load(path=None):
    """The rule list to walk: the user's (if any) then, unless replaced, the defaults."""
    _, default = parse(_read(DEFAULT_PATH), DEFAULT_PATH)
    if path is None:
        return default
    mode, user = parse(_read(path), path)
    return user if mode == "replace" else user + default


def render(line, facts):
    def sub(m):
        v = facts.get(m.group(1))
        if v is None:
            return "n/a"
        try:
            return format(v, m.group(2)) if m.group(2) else (f"{v:.3g}" if isinstance(v, float) else str(v))
        except (ValueError, TypeError):
            return str(v)
    return PLACEHOLDER.sub(sub, line)


def resolve(recs, cands):
    for r in recs:
        if r == "none":
            return "none"
        if r == "best":
            c = F.best(cands)
        elif r == "megatron":
            c = F.best(cands, "megatron")
        elif r == "fsdp-tp":
            c = F.best(cands, "fsdp-tp")
        else:
            c = next((c for c in cands if c["layout"] == r and c["feasible"]), None)
        if c is not None:
            return c
    return None


def decide(rules, facts, cands):
    """(candidate | None, then-dict, path lines)."""
    path = []

    def walk(rs, depth):
        for r in rs:
            ok = bool(r.cond(facts))
            path.append(f"{'  ' * depth}{r.name}: if {r.cond.text} -> {ok}")
            if not ok:
                continue
            if r.children is not None:
                got = walk(r.children, depth + 1)
                if got:
                    return got
                continue
            c = resolve(r.then["recommend"], cands)
            if c is None:
                path.append(f"{'  ' * depth}  recommend {r.then['recommend']}: not feasible, next rule")
                continue
            path.append(f"{'  ' * depth}  recommend {'none' if c == 'none' else c['layout']}")
            return (None if c == "none" else c), r.then
        return None

    got = walk(rules, 0)
    if got is None:
        c = F.best(cands)
        path.append(f"no rule decided: the most efficient feasible layout ({c['layout'] if c else 'none'})")
        return c, {"recommend": ["best"], "framework": None, "rationale": ["no rule decided"]}, path
    return got[0], got[1], path
