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


def test_read_size_grows_with_a_large_cache():
    from inferlab.bench.memory import DEFAULT_BYTES, read_size_for_cache

    assert read_size_for_cache(None) == DEFAULT_BYTES == 256 * 2**20
    assert read_size_for_cache(32 * 2**20) == DEFAULT_BYTES  # eight times 32 MiB is the default itself
    assert read_size_for_cache(96 * 2**20) == 8 * 96 * 2**20  # a 96 MiB L3: read 768 MiB, not 256
    with pytest.raises(ValueError):
        read_size_for_cache(-1)


def test_datasheet_memory_is_listed_for_every_gpu_with_a_bandwidth():
    from inferlab.bench.memory import DATASHEET_MEMORY

    assert set(DATASHEET_MEMORY) == set(DATASHEET_BANDWIDTH)
    assert DATASHEET_MEMORY["H200"] == 141e9 and DATASHEET_MEMORY["H100 SXM"] == 80e9


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_matvec_sweep_multiplies_every_weight_matrix_once(family):
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    from inferlab.analysis.sizing import decode_weight_bytes, matmul_parameters
    from inferlab.bench.memory import MatvecSweep, measure_matvec_sweep

    torch.manual_seed(0)
    if family == "gpt2":  # Conv1D projections, a tied head
        model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=97, n_positions=16))
        matrices = 2 * 4 + 1
    else:  # nn.Linear projections, an untied head
        model = LlamaForCausalLM(LlamaConfig(vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                             num_key_value_heads=2, intermediate_size=48, tie_word_embeddings=False))
        matrices = 2 * 7 + 1
    before = torch.get_num_threads()
    sweep = measure_matvec_sweep(model, repeats=3, threads=1)
    assert torch.get_num_threads() == before
    assert sweep.matrices == matrices and sweep.threads == 1 and len(sweep.seconds) == 3
    assert sweep.bytes_read == 4 * matmul_parameters(model) <= decode_weight_bytes(model)
    assert sweep.bytes_per_s == sweep.bytes_read / sweep.median_s
    assert MatvecSweep(100, (0.3, 0.1, 0.2), 1, 1).median_s == 0.2
    with pytest.raises(ValueError):
        measure_matvec_sweep(model, repeats=0)
    with pytest.raises(ValueError, match="no weight matrices"):
        measure_matvec_sweep(torch.nn.Sequential(torch.nn.ReLU()))
