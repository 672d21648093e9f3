"""The rooms of comm_bench as installed (transports/ and topology/ moved under comm_bench/, as
setup.py's package_dir does): no cycle among rooms; system/ and the leaf modules at the bottom;
no room uses another's private members. Read from the source with ast (nothing is imported),
so an import inside a function counts as much as one at the top."""
import ast
import functools
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAPPED = ("transports", "topology")     # top-level folders installed as comm_bench.<name>
LEAVES = {"errors", "links"}            # import nothing of comm_bench; system/ may import them
IMPLICIT = {"self", "cls"}

# (module as installed, "room.member" it uses: the room of what it imported, or the name of an
# object it was handed) that may still use another room's private member
ALLOWED_PRIVATE = {
    # mpi4py's module, handed in as MPI: its own _handleof (the MPI handle for ctypes), no room's
    ("comm_bench/transports/_mpi_native.py", "MPI._handleof"),
}


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The source laid out as installed: comm_bench/ with transports/ and topology/ in it."""
    top = tmp_path_factory.mktemp("installed")
    py = shutil.ignore_patterns("fixtures", "__pycache__", "*.so", "*.pyc")
    shutil.copytree(ROOT / "comm_bench", top / "comm_bench", ignore=py)
    for name in MAPPED:
        shutil.copytree(ROOT / name, top / "comm_bench" / name, ignore=py)
    return top


def room_of(module: str):
    """'comm_bench.system.native' -> 'system'; 'comm_bench.errors' -> 'errors'; None for the
    package itself (its __version__) and outside it."""
    parts = module.split(".")
    if parts[0] != "comm_bench" or len(parts) < 2:
        return None
    return parts[1] if parts[1] != "__init__" else None


@functools.cache     # each test reads the same tree: parsed once
def modules(top: Path) -> tuple:
    """((path, module name, its ast), ...) of every module under top/comm_bench."""
    out = []
    for path in sorted((top / "comm_bench").rglob("*.py")):
        rel = path.relative_to(top).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        out.append((path, name, ast.parse(path.read_text(), str(path))))
    return tuple(out)


def imported(node, name: str, is_package: bool):
    """[(module imported, local name or None)] of one import statement of module `name`."""
    if isinstance(node, ast.Import):
        return [(a.name, a.asname or (a.name if "." not in a.name else None)) for a in node.names]
    base = name.split(".") if is_package else name.split(".")[:-1]
    if node.level:
        base = base[:len(base) - node.level + 1]
        module = ".".join(base + ([node.module] if node.module else []))
    else:
        module = node.module
    # `from pkg import sub`: sub may be a submodule (its room) or a name of pkg
    return [(f"{module}.{a.name}", a.asname or a.name) for a in node.names]


def graph(top: Path):
    """room -> {rooms it imports}; and per module, [(local name, room of what it names, member)]."""
    known = {n for _, n, _ in modules(top)}
    edges, bindings = {}, {}
    for path, name, tree in modules(top):
        own = room_of(name)
        package = path.name == "__init__.py"
        binds = bindings.setdefault(path, [])
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target, local in imported(node, name, package):
                # `from .x import y`: y a module of ours, else a name in module x
                mod = target if target in known or isinstance(node, ast.Import) else target.rsplit(".", 1)[0]
                room = room_of(mod)
                if room and own and room != own:
                    edges.setdefault(own, set()).add(room)
                binds.append((local, room if mod.startswith("comm_bench") else "outside", target))
    return edges, bindings


def cycles(edges):
    """Strongly connected sets of more than one room (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(set(edges) | {w for ws in edges.values() for w in ws}):
        if v not in index:
            visit(v)
    return out


def test_no_cycle_among_the_rooms(installed):
    edges, _ = graph(installed)
    assert cycles(edges) == []


def test_system_and_the_leaves_are_at_the_bottom(installed):
    edges, _ = graph(installed)
    for leaf in LEAVES:
        assert not edges.get(leaf), f"{leaf}.py imports {sorted(edges[leaf])}"
    assert edges.get("system", set()) <= LEAVES, f"system/ imports {sorted(edges['system'] - LEAVES)}"


def test_the_installed_shape_is_what_was_checked(installed):
    edges, _ = graph(installed)
    # the mapped folders are rooms of the graph: an import of theirs was read, not skipped
    assert "transports" in edges.get("registry", set())
    assert {"system", "links"} <= edges.get("topology", set())


def private_uses(top: Path):
    """(module path, 'room.member') where a module uses a private member of another room:
    `from ..room.mod import _name`, or `x._name` where x names a module or object of another
    room, or an object this module did not import from its own room (a parameter: the caller's)."""
    _, bindings = graph(top)
    found = set()
    for path, name, tree in modules(top):
        own = room_of(name)
        rel = path.relative_to(top).as_posix()
        local = {}
        for bound, room, target in bindings[path]:
            local[bound] = (room, target)
            member = target.rsplit(".", 1)[-1]
            if room not in (own, "outside", None) and member.startswith("_") and not member.startswith("__"):
                found.add((rel, f"{room}.{member}"))
        defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
                continue
            attr, base = node.attr, node.value.id
            if not attr.startswith("_") or attr.startswith("__") or base in IMPLICIT or base in defined:
                continue
            room, target = local.get(base, (None, None))
            if room in (own, "outside"):
                continue
            found.add((rel, f"{room or base}.{attr}"))
    return found


def test_no_room_uses_another_rooms_private_members(installed):
    used = private_uses(installed)
    assert sorted(used - ALLOWED_PRIVATE) == []
