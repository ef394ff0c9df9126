"""peak_allocated sees PyTorch's CPU allocations, their peak, and what a call leaves behind (Chapter 13)."""
import pytest
import torch

from inferlab.bench.peak_memory import peak_allocated
from inferlab.models.tiled_attention import cpu_flash_bytes, naive_peak_bytes, sdpa_attention
from inferlab.models.base import causal_attention


def test_peak_counts_live_tensors_and_frees():
    def two_then_one():
        a = torch.empty(1000, dtype=torch.float32)  # 4,000 bytes
        b = torch.empty(500, dtype=torch.float32)  # 2,000 bytes, both alive: peak 6,000
        del a, b
        return torch.empty(250, dtype=torch.float32)  # 1,000 bytes left behind
    m = peak_allocated(two_then_one)
    assert m.peak_bytes == 6000 and m.net_bytes == 1000 and m.allocated_bytes == 7000 and m.allocations == 3
    assert m.result.numel() == 250


def test_naive_and_flash_predictions_hold_to_the_byte():
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 4, 96, 16), torch.randn(1, 2, 96, 16), torch.randn(1, 2, 96, 16)
    positions = torch.arange(96)
    assert peak_allocated(lambda: causal_attention(q, k, v, positions)).peak_bytes == naive_peak_bytes(1, 4, 96, 96)
    parts = cpu_flash_bytes(1, 4, 96, 96, 16, torch.get_num_threads())
    want = parts["output"] + parts["logsumexp"] + parts["scratch"]
    assert peak_allocated(lambda: sdpa_attention(q, k, v)).peak_bytes == want


def test_other_devices_are_refused():
    with pytest.raises(ValueError):
        peak_allocated(lambda: None, device="mps")
