"""`comm-bench topo`: this node's GPUs, NVLinks, PCIe paths, NUMA, RDMA and Ethernet
NICs, the GPU/NIC matrix (like `nvidia-smi topo -m`) and each link's theoretical rate."""
import json
import os

import click

from ..errors import UsageError
from .run_options import wide_option


def show(as_json=False, root="/", fixture=None, nvml_json=None, record_dir=None, wide=False):
    from .. import topology as t

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
    from ..views.table import WIDTH
    return json.dumps(snap, indent=1) if as_json else t.format_text(snap, None if wide else WIDTH)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the snapshot as JSON.")
@click.option("--root", default="/", envvar="COMM_BENCH_TOPO_ROOT", show_default=True,
              help="sysfs root: / (this node) or a recorded fixture tree.")
@click.option("--fixture", default=None, help="Name of a shipped fixture (e.g. dgx-h100) instead of --root.")
@click.option("--nvml", "nvml_json", default=None, type=click.Path(dir_okay=False),
              help="Recorded NVML JSON instead of querying NVML.")
@click.option("--record", "record_dir", default=None, type=click.Path(file_okay=False),
              help="Record this node's sysfs subset + NVML into DIR (a fixture tree).")
@wide_option()
def topo(as_json, root, fixture, nvml_json, record_dir, wide):
    """Show this node's topology: GPUs, NVLink, PCIe, NUMA, NICs and the GPU/NIC matrix."""
    click.echo(show(as_json, root, fixture, nvml_json, record_dir, wide))
