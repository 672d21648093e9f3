"""validate's rules: the defaults (comm_bench/data/rules.yaml, their only source), a user's
rules file merged over them and checked, and the lookups check() makes (expected minimum
per link class and transport, outlier thresholds). Format: docs/validate-rules.md."""
from __future__ import annotations

import copy
import math
import os
from typing import Any

import yaml

from .. import sizes
from ..errors import UsageError
from ..results.doclimits import MAX_RULES_BYTES, loads_json, loads_yaml
from ..results.safefile import read_bounded


def default_rules_path() -> str:
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "rules.yaml")


with open(default_rules_path(), encoding="utf-8") as _f:
    DEFAULT_RULES = yaml.safe_load(_f)
RULE_KEYS = set(DEFAULT_RULES)
CLASS_KEYS = {"efficiency", "floor_gbs", "min_size"}


def parse_size(v: object) -> int:
    """A rules size: a YAML integer or the sweep's own size syntax (comm_bench.sizes), so
    rules and -b/-e accept the same sizes."""
    try:
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            raise UsageError("not a size")
        return sizes.parse_size(v)
    except UsageError:
        raise UsageError(f"rules: bad size {v!r} (use e.g. 1M, 64K, 1048576)") from None


def _merge(base: dict[str, Any], over: dict[str, Any] | None) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in (over or {}).items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def load_rules(path: str | None = None) -> dict[str, Any]:
    """The default rules merged with a YAML/JSON rules file; UsageError on bad input."""
    if path is None:
        return copy.deepcopy(DEFAULT_RULES)
    try:
        text = read_bounded(path, "rules file", limit=MAX_RULES_BYTES).decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"rules file '{path}' is not UTF-8 text") from None
    if path.endswith(".json"):
        try:
            user = loads_json(text, "rules file", path)
        except ValueError as exc:
            raise UsageError(f"rules file '{path}' is not valid JSON: {exc}") from None
    else:
        try:
            user = loads_yaml(text, "rules file", path)
        except yaml.YAMLError as exc:
            first = str(exc).replace("\n", " ")[:120]
            raise UsageError(f"rules file '{path}' is not valid YAML: {first}") from None
    if user is None:
        user = {}
    if not isinstance(user, dict):
        raise UsageError(f"rules file '{path}': expected a mapping at the top level")
    rules = _merge(DEFAULT_RULES, user)
    _check_rules(rules, path)
    return rules


def _check_rules(rules: dict[str, Any], path: str = "rules") -> None:
    unknown = set(rules) - RULE_KEYS
    if unknown:
        raise UsageError(f"rules file '{path}': unknown key '{sorted(unknown)[0]}' "
                         f"(known: {', '.join(sorted(RULE_KEYS))})")
    if rules["version"] != DEFAULT_RULES["version"] or isinstance(rules["version"], bool):
        raise UsageError(f"rules file '{path}': version {rules['version']!r} is not one this comm-bench "
                         f"reads (it reads version {DEFAULT_RULES['version']})")
    parse_size(rules["min_size"])
    tables = [("classes", rules.get("classes") or {})]
    for t, tr in (rules.get("transports") or {}).items():
        if not isinstance(tr, dict) or set(tr) - {"classes", "outliers"}:
            raise UsageError(f"rules file '{path}': transports.{t} may only hold 'classes' and 'outliers'")
        check_outliers(tr.get("outliers") or {}, f"transports.{t}.outliers", path)
        tables.append((f"transports.{t}.classes", tr.get("classes") or {}))
    for where, classes in tables:
        if not isinstance(classes, dict):
            raise UsageError(f"rules file '{path}': {where} must be a mapping")
        for cls, spec in classes.items():
            spec = spec or {}
            if not isinstance(spec, dict) or set(spec) - CLASS_KEYS:
                raise UsageError(f"rules file '{path}': {where}.{cls} takes only "
                                 f"{', '.join(sorted(CLASS_KEYS))}")
            for k, v in spec.items():
                if k == "min_size":
                    parse_size(v)
                elif not _number(v):
                    raise UsageError(f"rules file '{path}': {where}.{cls}.{k} must be a number >= 0")
    check_outliers(rules["outliers"], "outliers", path, complete=True)
    check_outliers(rules["collectives"], "collectives", path, complete=True, keys=("scale",))
    check_confirm(rules, path)


OUTLIER_KEYS = ("z", "ratio", "pair_ratio", "min_peers", "min_size_fraction", "latency_ratio", "latency_pair_ratio")
AT_LEAST_ONE = ("latency_ratio", "latency_pair_ratio")   # how many times the peers' latency: below 1 is not "high"


def check_outliers(o: Any, where: str, path: str, complete: bool = False,
                   keys: tuple[str, ...] = OUTLIER_KEYS) -> None:
    if not isinstance(o, dict):
        raise UsageError(f"rules file '{path}': {where} must be a mapping")
    unknown = set(o) - set(keys)
    if unknown:
        raise UsageError(f"rules file '{path}': unknown key {where}.{sorted(unknown)[0]} "
                         f"(known: {', '.join(keys)})")
    for k in keys if complete else o:
        if not _number(o.get(k)):
            raise UsageError(f"rules file '{path}': {where}.{k} must be a number >= 0")
        if k in AT_LEAST_ONE and o[k] < 1:
            raise UsageError(f"rules file '{path}': {where}.{k} must be a number >= 1 (times the peers' latency)")


def _number(v: Any) -> bool:
    """A finite number >= 0 (YAML's .nan and .inf are not)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


def outlier_rules(rules: dict[str, Any], transport: str) -> dict[str, Any]:
    o = dict(rules["outliers"])
    o.update(((rules.get("transports") or {}).get(transport or "") or {}).get("outliers") or {})
    return o


def document_outlier_rules(rules: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    """outlier_rules for the transport a results document names."""
    return outlier_rules(rules, (doc.get("transport") or "").lower())


def class_rule(rules: dict[str, Any], transport: str, cls: str) -> dict[str, Any]:
    spec = dict((rules.get("classes") or {}).get(cls) or {})
    spec.update(((rules.get("transports") or {}).get(transport or "", {}).get("classes") or {}).get(cls) or {})
    return spec


def expected_collective_min(rules: dict[str, Any], transport: str, cls: str,
                            theoretical: float | None) -> float | None:
    """A collective's busbw floor: the class's expected minimum x collectives.scale."""
    exp = expected_min(rules, transport, cls, theoretical)
    return None if exp is None else exp * rules["collectives"]["scale"]


def expected_min(rules: dict[str, Any], transport: str, cls: str, theoretical: float | None) -> float | None:
    spec = class_rule(rules, transport, cls)
    vals = []
    if theoretical and spec.get("efficiency"):
        vals.append(theoretical * spec["efficiency"])
    if spec.get("floor_gbs"):
        vals.append(float(spec["floor_gbs"]))
    return max(vals) if vals else None


# the confirm phase (`sweep --confirm K`, `comm-bench check`: comm_bench/validate/confirm.py)
CONFIRM_KEYS = ("suspect_z", "min_effect", "unstable_ratio", "min_confidence", "max_suspects", "max_named")


def check_confirm(rules: dict[str, Any], path: str) -> None:
    check_outliers(rules.get("confirm"), "confirm", path, complete=True, keys=CONFIRM_KEYS)
    for k in ("min_effect", "min_confidence"):
        if rules["confirm"][k] >= 1:
            raise UsageError(f"rules file '{path}': confirm.{k} must be below 1")
