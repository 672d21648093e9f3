"""`comm-bench topo`: this node's GPUs, NVLinks, PCIe paths, NUMA, RDMA and Ethernet
NICs, the GPU/NIC matrix (like `nvidia-smi topo -m`) and each link's theoretical rate.

Also runs from a plain checkout, even without click installed:
    python -m comm_bench.commands.topo [--json] [--record DIR]
"""
import argparse
import json
import os
import sys

try:
    import click
except ImportError:  # plain checkout on a bare GPU node: the argparse main() below
    click = None


def load_topology():
    """comm_bench.topology; from a source checkout, the sibling topology/ folder."""
    try:
        from .. import topology
        return topology
    except ImportError:
        import importlib.util
        src = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                           "topology", "__init__.py")
        if not os.path.exists(src):
            raise
        spec = importlib.util.spec_from_file_location(
            "comm_bench.topology", src, submodule_search_locations=[os.path.dirname(src)])
        mod = importlib.util.module_from_spec(spec)
        sys.modules["comm_bench.topology"] = mod
        spec.loader.exec_module(mod)
        return mod


def show(as_json=False, root="/", fixture=None, nvml_json=None, record_dir=None):
    from ..errors import UsageError
    t = load_topology()
    if record_dir:
        meta = t.record(record_dir, root=root)
        return f"recorded {meta['pci_functions']} PCI functions into {record_dir}"
    if fixture:
        if fixture not in t.fixture_names():
            raise UsageError(f"no fixture '{fixture}' (have: {', '.join(t.fixture_names())})")
        root = t.fixture_root(fixture)
    if not os.path.isdir(os.path.join(root, "sys")):
        raise UsageError(f"--root {root}: no sys/ folder there (give / or a recorded tree)")
    snap = t.snapshot(root, nvml=nvml_json)
    return json.dumps(snap, indent=1) if as_json else t.format_text(snap)


HELP = {"json": "Print the snapshot as JSON.",
        "root": "sysfs root: / (this node) or a recorded fixture tree.",
        "fixture": "Name of a shipped fixture (e.g. dgx-h100) instead of --root.",
        "nvml": "Recorded NVML JSON instead of querying NVML.",
        "record": "Record this node's sysfs subset + NVML into DIR (a fixture tree)."}

if click is not None:
    @click.command()
    @click.option("--json", "as_json", is_flag=True, help=HELP["json"])
    @click.option("--root", default="/", envvar="COMM_BENCH_TOPO_ROOT", show_default=True, help=HELP["root"])
    @click.option("--fixture", default=None, help=HELP["fixture"])
    @click.option("--nvml", "nvml_json", default=None, type=click.Path(dir_okay=False), help=HELP["nvml"])
    @click.option("--record", "record_dir", default=None, type=click.Path(file_okay=False), help=HELP["record"])
    def topo(as_json, root, fixture, nvml_json, record_dir):
        """Show this node's topology: GPUs, NVLink, PCIe, NUMA, NICs and the GPU/NIC matrix."""
        click.echo(show(as_json, root, fixture, nvml_json, record_dir))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="comm-bench topo", description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help=HELP["json"])
    ap.add_argument("--root", default=os.environ.get("COMM_BENCH_TOPO_ROOT", "/"), help=HELP["root"])
    ap.add_argument("--fixture", help=HELP["fixture"])
    ap.add_argument("--nvml", help=HELP["nvml"])
    ap.add_argument("--record", help=HELP["record"])
    a = ap.parse_args(argv)
    from ..errors import UsageError
    try:
        print(show(a.json, a.root, a.fixture, a.nvml, a.record))
    except UsageError as exc:
        print(f"comm-bench topo: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
