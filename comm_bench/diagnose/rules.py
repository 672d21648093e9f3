"""The `confirm` section of validate's rules (defaults: validate.DEFAULT_RULES)."""
from ..errors import UsageError

CONFIRM_KEYS = ("suspect_z", "min_effect", "unstable_ratio", "min_confidence", "max_suspects")


def check_confirm(rules, path):
    c = rules.get("confirm")
    if not isinstance(c, dict):
        raise UsageError(f"rules file '{path}': confirm must be a mapping")
    unknown = set(c) - set(CONFIRM_KEYS)
    if unknown:
        raise UsageError(f"rules file '{path}': unknown key confirm.{sorted(unknown)[0]} "
                         f"(known: {', '.join(CONFIRM_KEYS)})")
    for k in CONFIRM_KEYS:
        v = c.get(k)
        if not (isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float("inf")
                and v >= 0):
            raise UsageError(f"rules file '{path}': confirm.{k} must be a number >= 0")
    for k in ("min_effect", "min_confidence"):
        if c[k] >= 1:
            raise UsageError(f"rules file '{path}': confirm.{k} must be below 1")
