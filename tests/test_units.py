import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpucluster.units import format_bytes, parse_bytes, size_sweep


@pytest.mark.parametrize("text, value", [("8", 8), ("128K", 131072), ("8G", 8 * 2**30), ("1MiB", 2**20),
                                         ("1.5K", 1536), (64, 64)])
def test_parse_bytes(text, value):
    assert parse_bytes(text) == value


@pytest.mark.parametrize("text", ["", "eight", "8X", "-1"])
def test_parse_bytes_rejects(text):
    with pytest.raises(ValueError):
        parse_bytes(text)


def test_sweep_is_nccl_tests_sequence():
    assert size_sweep(8, 128, 2) == [8, 16, 32, 64, 128]
    assert size_sweep(8, 8 * 2**30, 2)[-1] == 8 * 2**30 and len(size_sweep(8, 8 * 2**30, 2)) == 31
    with pytest.raises(ValueError):
        size_sweep(16, 8)


@given(st.integers(min_value=0, max_value=2**40))
def test_format_then_sizes_are_sane(n):
    assert format_bytes(n).split()[-1] in ("B", "KiB", "MiB", "GiB")
