"""bench/gpu_grader.py's memory-bandwidth bound for the decode steps of a run."""

import doctest
from types import SimpleNamespace

import pytest

from bench import gpu_grader
from bench.gpu_grader import LARGE, bandwidth_bound_s, kv_bytes_per_token


def test_a_token_holds_keys_and_values_of_every_layer_and_kv_head():
    config = SimpleNamespace(**LARGE)  # 22 layers, 4 KV heads of 2048 / 32 = 64 dims
    assert kv_bytes_per_token(config, dtype_bytes=2) == 2 * 22 * 4 * 64 * 2
    assert kv_bytes_per_token(SimpleNamespace(**LARGE, head_dim=128), dtype_bytes=2) == 45056


def test_each_step_reads_the_weights_once_and_each_decoding_rows_cache():
    """Two calls: one of a single row, one whose short row stops while the long one goes on."""
    one = bandwidth_bound_s([[(100, 4)]], weight_bytes=10_000, kv_bytes_per_token=10,
                            bandwidth=1000)
    assert one == pytest.approx((4 * 10_000 + (100 + 101 + 102 + 103) * 10) / 1000)
    two = bandwidth_bound_s([[(100, 4)], [(5, 1), (50, 3)]], weight_bytes=10_000,
                            kv_bytes_per_token=10, bandwidth=1000)
    assert two == pytest.approx(one + (3 * 10_000 + (5 + 50 + 51 + 52) * 10) / 1000)


def test_the_docstring_example_holds():
    assert doctest.testmod(gpu_grader).failed == 0
