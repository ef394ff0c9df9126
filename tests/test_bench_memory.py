"""The read-bandwidth measurement and the decode bound (Chapter 2)."""
import math

import pytest
import torch

from inferlab.bench.memory import DATASHEET_BANDWIDTH, ReadBandwidth, decode_time_floor_s, measure_read_bandwidth


def test_read_bandwidth_is_a_positive_finite_rate_with_its_bytes_counted():
    before = torch.get_num_threads()
    result = measure_read_bandwidth(n_bytes=4 * 2**20 + 3, repeats=3, threads=1)
    assert result.bytes_read == (4 * 2**20 + 3) // 4 * 4  # whole float32 elements only
    assert len(result.seconds) == 3 and all(s > 0 for s in result.seconds)
    assert result.threads == 1 and torch.get_num_threads() == before  # the setting is restored
    assert math.isfinite(result.bytes_per_s) and result.bytes_per_s > 0
    assert result.bytes_per_s == result.bytes_read / result.median_s


def test_median_and_rate_arithmetic():
    r = ReadBandwidth(bytes_read=1000, seconds=(0.5, 0.1, 0.2), threads=1)
    assert r.median_s == 0.2 and r.bytes_per_s == 5000 and r.best_bytes_per_s == 10_000


def test_bad_arguments_are_refused():
    for kwargs in (dict(n_bytes=3), dict(repeats=0), dict(threads=0)):
        with pytest.raises(ValueError):
            measure_read_bandwidth(**kwargs)
    with pytest.raises(ValueError):
        decode_time_floor_s(1e9, 0.0)


def test_decode_floor_of_a_7b_float16_model_on_datasheet_bandwidths():
    weights = 7e9 * 2
    assert decode_time_floor_s(weights, DATASHEET_BANDWIDTH["H100 SXM"]) == pytest.approx(4.179e-3, rel=1e-3)
    floors = [decode_time_floor_s(weights, bw) for bw in DATASHEET_BANDWIDTH.values()]
    assert floors == sorted(floors, reverse=True)  # listed from the slowest memory to the fastest


def test_last_level_cache_is_read_from_sysfs_or_unknown(tmp_path):
    from inferlab.bench.memory import last_level_cache_bytes

    for index, size in (("index0", "48K"), ("index2", "2048K"), ("index3", "32M")):
        (tmp_path / index).mkdir()
        (tmp_path / index / "size").write_text(size + "\n")
    assert last_level_cache_bytes(tmp_path) == 32 * 2**20
    assert last_level_cache_bytes(tmp_path / "missing") is None
