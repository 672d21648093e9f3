"""What the launcher tests on network-namespace hosts share: the tools they drive and their
marks (launchers, netns; skipped with the reason where namespaces cannot be made)."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import netns_fabric  # noqa: E402
import netns_hosts  # noqa: E402,F401 - the tests use it through this module

OK, WHY = netns_fabric.available()
MARKS = [pytest.mark.launchers, pytest.mark.netns, pytest.mark.skipif(not OK, reason=f"network namespaces: {WHY}")]
