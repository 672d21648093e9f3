"""These tests need a real ibverbs device: tests/test_rdma.py runs them inside the
Soft-RoCE VM (tools/softroce_vm.py). Collected anywhere else they skip."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for minirun


def pytest_collection_modifyitems(config, items):
    try:
        has_device = bool(os.listdir("/sys/class/infiniband"))
    except OSError:
        has_device = False
    if has_device:
        return
    skip = pytest.mark.skip(reason="needs an RDMA device: tests/test_rdma.py runs these in the Soft-RoCE VM")
    for item in items:
        if "rdma_vm" in str(item.fspath):
            item.add_marker(skip)
