"""Chapter 9's checkers tell right answers from wrong ones."""
import pytest

from inferbook.checks.ch09 import (check_cache_equals_weights, check_capacity, check_crop, check_dynamic_allocation,
                                   check_kv_bytes, check_positions_ratio, dynamic_allocation_bytes, kv_bytes,
                                   positions_processed)

# Llama 3.1 70B's attention: 80 layers, 64 query heads, 8 key/value heads of 128
L70 = dict(layers=80, kv_heads=8, head_dim=128)


def test_kv_bytes_formula():
    assert kv_bytes(**L70, bytes_per_element=2, tokens=1) == 327_680
    assert kv_bytes(12, 12, 64, 4, 10, batch=3) == 2 * 12 * 12 * 64 * 4 * 30
    with pytest.raises(ValueError):
        kv_bytes(0, 8, 128, 2, 1)


def test_check_kv_bytes(capsys):
    want = 327_680 * 32_768 * 8
    assert check_kv_bytes(want, **L70, bytes_per_element=2, tokens=32_768, batch=8) is True
    assert check_kv_bytes(want * 1.01, **L70, bytes_per_element=2, tokens=32_768, batch=8) is True
    capsys.readouterr()
    assert check_kv_bytes(want / 2, **L70, bytes_per_element=2, tokens=32_768, batch=8) is False
    assert "keys and values" in capsys.readouterr().out
    assert check_kv_bytes(want * 8, **L70, bytes_per_element=2, tokens=32_768, batch=8, heads=64) is False
    assert "query heads" in capsys.readouterr().out
    assert check_kv_bytes(want / 8, **L70, bytes_per_element=2, tokens=32_768, batch=8) is False
    assert "every sequence" in capsys.readouterr().out


def test_check_cache_equals_weights(capsys):
    want = 8_030_261_248 / (2 * 32 * 8 * 128)
    assert check_cache_equals_weights(want, 8_030_261_248, 32, 8, 128) is True
    assert check_cache_equals_weights(want * 1.03, 8_030_261_248, 32, 8, 128) is True
    capsys.readouterr()
    assert check_cache_equals_weights(2 * want, 8_030_261_248, 32, 8, 128) is False
    assert "factor 2" in capsys.readouterr().out
    assert check_cache_equals_weights(want / 4, 8_030_261_248, 32, 8, 128) is False


def test_positions_and_their_ratio(capsys):
    assert positions_processed(3, 4) == (3 + 4 + 5 + 6, 6)
    without, with_cache = positions_processed(512, 512)
    assert check_positions_ratio(without / with_cache, 512, 512) is True
    assert check_positions_ratio(512, 512, 512) is False
    with pytest.raises(ValueError):
        positions_processed(0, 3)


def test_check_capacity(capsys):
    memory, weights, each = 80e9, 16.06e9, 8192 * 131_072
    want = int((memory - weights) // each)
    assert check_capacity(want, memory, weights, each) is True
    assert check_capacity(want + 1, memory, weights, each) is False
    capsys.readouterr()
    assert check_capacity(int(memory // each), memory, weights, each) is False
    assert "weights take" in capsys.readouterr().out
    assert check_capacity(0, 1e9, 2e9, 1e6) is True  # the weights alone do not fit: nothing else does
    with pytest.raises(ValueError):
        check_capacity(1, memory, weights, 0)


def test_check_dynamic_allocation(capsys):
    bpt = 46_080
    assert dynamic_allocation_bytes(bpt, 7, 8) == bpt * sum(range(7, 15))
    assert check_dynamic_allocation(bpt * sum(range(7, 15)), bpt, 7, 8) is True
    assert check_dynamic_allocation(bpt * 14, bpt, 7, 8) is False
    assert "holds at the end" in capsys.readouterr().out


def right_crop(cache, length):
    """A right answer: a static cache only moves its length back; a dynamic one also slices its tensors."""
    if hasattr(cache, "max_length"):
        cache.length = length
        return
    for store in (cache.keys, cache.values):
        for layer, tensor in enumerate(store):
            store[layer] = tensor[:, :, :length].clone()
    cache.length = length


def slices_only(cache, length):
    """A wrong answer: the tensors are sliced, but the cache still reports its old length."""
    for store in (cache.keys, cache.values):
        for layer, tensor in enumerate(store):
            if tensor is not None:
                store[layer] = tensor[:, :, :length]


def length_only(cache, length):
    """A wrong answer for the dynamic cache: the length moves back, the tensors keep every position."""
    cache.length = length


def test_check_crop(capsys):
    assert check_crop(right_crop) is True
    assert check_crop(slices_only) is False
    assert check_crop(length_only) is False
    assert "DynamicKVCache" in capsys.readouterr().out
