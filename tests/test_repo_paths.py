"""No product file names a path outside the repository: a reader of the project must be
able to open every file it cites (the developers' notes beside the repository are not
part of it; what the code relies on is in docs/internal-contracts.md)."""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTSIDE = re.compile(r"\.\./shared|shared/(DESIGN|ENVIRONMENT)\.md")


def test_no_product_file_cites_a_file_outside_the_repository():
    tracked = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    named = []
    for name in tracked:
        path = ROOT / name
        if name.startswith("tests/") or not path.is_file() or path.stat().st_size > 2 << 20:
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        named += [f"{name}:{i}" for i, line in enumerate(text.splitlines(), 1) if OUTSIDE.search(line)]
    assert not named, named
