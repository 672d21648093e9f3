"""The selection tests' synthetic results documents: tools/synthetic_results.py."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from synthetic_results import *  # noqa: F403
from synthetic_results import collective_doc, dgx_topology, document, node_topology, pairwise_doc, record, write  # noqa: F401
