import pytest

from comm_bench.errors import UsageError
from comm_bench.sizes import format_size, parse_size, size_range


@pytest.mark.parametrize("text,want", [
    ("8", 8), ("1K", 1024), ("1k", 1024), ("64M", 64 << 20), ("2G", 2 << 30), ("4KB", 4096),
    ("4KiB", 4096), (" 16 ", 16), (128, 128), ("1T", 1 << 40),
])
def test_parse_size(text, want):
    assert parse_size(text) == want


@pytest.mark.parametrize("bad", ["", "abc", "-8", "0", "1.5M", "8X", "M", "1 2"])
def test_bad_sizes_are_usage_errors(bad):
    with pytest.raises(UsageError) as exc:
        parse_size(bad, "--maxbytes")
    assert "\n" not in str(exc.value)


def test_size_range_like_nccl_tests():
    assert size_range("8", "128", "2") == [8, 16, 32, 64, 128]
    assert size_range("1K", "1M", "4") == [1024, 4096, 16384, 65536, 262144, 1048576]
    assert size_range("8", "100", "2") == [8, 16, 32, 64]
    assert size_range("1M", "1M", "2") == [1 << 20]
    assert size_range("3", "20", "1.5") == [3, 4, 6, 9, 13, 19]


@pytest.mark.parametrize("args,msg", [
    (("1M", "1K", "2"), "larger than"), (("8", "64", "1"), "greater than 1"),
    (("8", "64", "x"), "not a number"), (("8", "zz", "2"), "not a size"),
])
def test_size_range_errors(args, msg):
    with pytest.raises(UsageError, match=msg):
        size_range(*args)


def test_format_size():
    assert [format_size(x) for x in (8, 1024, 3 << 20, 1 << 30, 1000)] == ["8", "1K", "3M", "1G", "1000"]
