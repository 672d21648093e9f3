"""Where each host sits in the fabric, from a hostfile grouping (`sweep --groups FILE`):
one line per host, `HOST LEAF [POD]` (whitespace separated, '#' starts a comment), e.g.
from `ibnetdiscover`'s switch names or the cluster's rack list. The topology pattern
pairs ranks at each switch distance from it; the document keeps it as
"fabric": {"switch_of": {host: leaf}} for validate and heatmap (switch x switch)."""
from __future__ import annotations

from ..errors import UsageError
from ..results.safefile import read_bounded


def parse_groups(path: str) -> dict:
    """{host: (pod, leaf)} or {host: (leaf,)}; UsageError naming the line when it is bad."""
    try:
        text = read_bounded(path, "groups file", limit=64 << 20).decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"--groups '{path}' is not UTF-8 text") from None
    out, depth = {}, None
    for i, line in enumerate(text.splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) not in (2, 3) or (depth is not None and len(fields) != depth):
            raise UsageError(f"--groups '{path}' line {i}: expected 'HOST LEAF [POD]', the same number "
                             f"of fields on every line (got {line.strip()!r})")
        depth = len(fields)
        host, leaf = fields[0], fields[1]
        out[host] = (fields[2], leaf) if len(fields) == 3 else (leaf,)
    if not out:
        raise UsageError(f"--groups '{path}' names no host")
    return out


def rank_groups(hosts: list, mapping: dict) -> list:
    """groups[rank] for the ranks' host names; UsageError naming a host the file lacks."""
    missing = sorted({h for h in hosts if h not in mapping})
    if missing:
        raise UsageError(f"--groups: host {missing[0]} is not in the groups file "
                         f"({len(missing)} host(s) missing)")
    return [tuple(mapping[h]) for h in hosts]


def fabric_description(mapping: dict) -> dict:
    return {"switch_of": {h: g[-1] for h, g in sorted(mapping.items())}}
