"""The `confirm` section of validate's rules (defaults: validate.DEFAULT_RULES)."""
from ..errors import UsageError

CONFIRM_KEYS = ("suspect_z", "min_effect", "unstable_ratio", "min_confidence", "max_suspects")


def check_confirm(rules, path):
    from ..validate import _check_outliers

    _check_outliers(rules.get("confirm"), "confirm", path, complete=True, keys=CONFIRM_KEYS)
    for k in ("min_effect", "min_confidence"):
        if rules["confirm"][k] >= 1:
            raise UsageError(f"rules file '{path}': confirm.{k} must be below 1")
