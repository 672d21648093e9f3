"""Fixtures for every host-side test (helpers live in cbtest.py)."""
import pytest


@pytest.fixture
def tmp_results(tmp_path):
    return tmp_path / "results.json"
