import dataclasses
import json
import os
import sys
from pathlib import Path

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

from inferbook.checks import ch02 as checks_ch02
from inferlab.compat import output_cache
from inferlab.errors import BadRequest, InferlabError
from inferlab.analysis.sizing import (
    PRESETS, BadShape, LoadTiming, ModelShape, count_forward_flops, count_model_parameters, count_parameters,
    decode_weight_bytes, estimate, flops_per_token_2n, forward_flops, kv_bytes_per_token, kv_cache_bytes,
    matmul_parameters, measured_kv_bytes, meta_model, parameter_breakdown, parameter_group, parameters_by_layer,
    preset, shape_from_config, tied_parameters, time_load_in_fresh_process, to_config, weights_bytes,
)
from inferlab.models.shape import UnsupportedModel

# Published totals: GPT-2 small from the GPT-2 weights, the bundled SmolLM2 from its GGUF, and the
# Llama totals as the Hugging Face model pages report them.
PUBLISHED = {"gpt2": 124_439_808, "smollm2-135m": 134_515_008, "llama-2-7b": 6_738_415_616,
             "llama-3-8b": 8_030_261_248, "llama-2-70b": 68_976_648_192}

LLAMA = dict(family="llama", vocab=10, hidden=32, layers=1, heads=4, kv_heads=4, head_dim=8, intermediate=8,
             context=8, tied=True)


@pytest.fixture
def bundled_gguf() -> Path:
    """The GGUF file of the bundled model, or a skip where its package is not installed."""
    from inferlab.models.loaders import smollm2_gguf

    try:
        return smollm2_gguf()
    except InferlabError as error:
        pytest.skip(f"bundled GGUF unavailable: {error}")


@pytest.mark.parametrize("name, total", PUBLISHED.items())
def test_formula_matches_published_totals(name, total):
    assert count_parameters(PRESETS[name]) == total


@pytest.mark.parametrize("name", list(PRESETS))
def test_formula_matches_transformers_group_by_group(name):
    model = meta_model(PRESETS[name])
    assert count_model_parameters(model) == parameter_breakdown(PRESETS[name])
    assert sum(p.numel() for p in model.parameters()) == count_parameters(PRESETS[name])


@pytest.mark.parametrize("name", list(PRESETS))
def test_shape_round_trips_through_transformers_configs(name):
    again = shape_from_config(to_config(PRESETS[name]), name)
    assert dataclasses.replace(again, source=PRESETS[name].source) == PRESETS[name]


def test_the_one_reader_reads_gpt2_defaults_and_llama_head_dim(tiny_models):
    assert dataclasses.replace(shape_from_config(GPT2Config(), "gpt2"), source=PRESETS["gpt2"].source) == PRESETS["gpt2"]
    model = tiny_models["llama"]  # 4 heads of width 32 on a width-64 model
    shape = shape_from_config(model.config)
    assert (shape.head_dim, shape.kv_heads, shape.rope_theta, shape.context) == (32, 2, 1000.0, 64)
    assert count_model_parameters(model) == parameter_breakdown(shape)


def test_tied_head_is_shared_and_counted_once():
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=4, vocab_size=97, n_positions=16))
    assert ("transformer.wte.weight", "lm_head.weight") in tied_parameters(model)
    assert count_model_parameters(model)["LM head"] == 0
    untied = ModelShape("gpt2", 97, 32, 1, 4, 4, 8, 128, 16, False, name="u")
    assert count_parameters(untied) - count_parameters(dataclasses.replace(untied, tied=True)) == 97 * 32


def test_per_layer_counts_sum_to_total():
    model = meta_model(PRESETS["smollm2-135m"])
    rows = parameters_by_layer(model)
    assert len([k for k in rows if k.startswith("layer")]) == 30
    assert len({v for k, v in rows.items() if k.startswith("layer")}) == 1
    assert sum(rows.values()) == PUBLISHED["smollm2-135m"]


def test_memory_arithmetic():
    assert weights_bytes(1000, "float32") == 4000 and weights_bytes(1000, "int4") == 500
    assert weights_bytes(70_000_000_000, "float16") == 140e9  # 70e9 parameters x 2 bytes
    gpt2 = PRESETS["gpt2"]
    assert kv_bytes_per_token(gpt2, "float16") == 2 * 12 * 12 * 64 * 2
    # GQA: 8 KV heads instead of 64 make the 70B cache 8 times smaller than with full heads
    full = dataclasses.replace(PRESETS["llama-2-70b"], kv_heads=64)
    assert kv_cache_bytes(full, 4096) == 8 * kv_cache_bytes(PRESETS["llama-2-70b"], 4096)


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_flop_and_kv_formulas_match_a_real_forward_pass(tiny_models, name):
    model, shape = tiny_models[name], shape_from_config(tiny_models[name].config)
    assert sum(p.numel() for p in model.parameters()) == count_parameters(shape)
    ids = torch.randint(0, shape.vocab, (1, 11))
    model.set_attn_implementation("eager")  # the CPU's fused attention kernel is invisible to the counter
    try:
        counted = count_forward_flops(model, ids)
    finally:
        model.set_attn_implementation("sdpa")
    assert sum(counted.values()) == sum(forward_flops(shape, 11).values())
    assert counted["bmm"] == forward_flops(shape, 11)["attention scores"]
    with torch.inference_mode():
        cache = output_cache(model(input_ids=ids, use_cache=True))
    assert measured_kv_bytes(cache) == kv_cache_bytes(shape, 11, dtype="float32")


def test_two_n_rule_differs_from_the_count_in_the_expected_places():
    shape = PRESETS["gpt2"]
    per_token = sum(forward_flops(shape, 1).values())
    n = count_parameters(shape)
    # tied: the embedding lookup costs nothing, the LM head costs 2 V d; positions and biases cost nothing
    biases_norms = parameter_breakdown(shape)["norms"] + shape.layers * (4 * 768 + 4 * 768 + 768)
    assert per_token == flops_per_token_2n(n) - 2 * 1024 * 768 - 2 * biases_norms + 4 * 12 * 768


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_matmul_parameters_give_the_linear_flops_exactly(tiny_models, name):
    model, shape = tiny_models[name], shape_from_config(tiny_models[name].config)
    ids = torch.randint(0, shape.vocab, (1, 5))
    model.set_attn_implementation("eager")
    try:
        counted = count_forward_flops(model, ids)
    finally:
        model.set_attn_implementation("sdpa")
    attention = 4 * shape.layers * shape.heads * shape.head_dim * 5 * 5  # scores and values, full square
    assert sum(counted.values()) == 2 * matmul_parameters(model) * 5 + attention


def test_matmul_parameters_and_decode_bytes_count_a_tied_head_and_skip_lookups():
    small = dict(n_layer=1, n_embd=32, n_head=4, vocab_size=97, n_positions=16)
    tied = GPT2LMHeadModel(GPT2Config(**small))
    untied = GPT2LMHeadModel(GPT2Config(**small, tie_word_embeddings=False))
    matrices = 4 * 32 * 32 + 2 * 32 * 128  # Q, K, V, out and the two MLP matrices of one block
    assert matmul_parameters(tied) == matmul_parameters(untied) == matrices + 97 * 32  # the head multiplies either way
    n = sum(p.numel() for p in tied.parameters())
    assert decode_weight_bytes(tied) == 4 * (n - 16 * 32)  # all but the position table, read one row at a time
    assert decode_weight_bytes(untied) == 4 * (n - 16 * 32)  # the untied embedding is a lookup; the head is read
    assert decode_weight_bytes(untied.to(torch.float16)) == 2 * (n - 16 * 32)


def test_estimate_and_bad_input():
    e = estimate(PRESETS["llama-2-70b"], "int4", tokens=4096, batch=2)
    assert e.kv_dtype == "float16" and e.weights_bytes == PUBLISHED["llama-2-70b"] / 2
    assert "GiB" in e.summary()
    with pytest.raises(BadShape, match="unknown dtype"):
        weights_bytes(10, "int3")
    with pytest.raises(BadShape, match="unknown preset"):
        preset("gpt5")
    with pytest.raises(BadRequest, match="context"):  # FLOPs past the context: the model cannot run them
        estimate(PRESETS["gpt2"], tokens=1025)
    for change, match in [(dict(family="rnn"), "family"), (dict(hidden=0), "positive"), (dict(kv_heads=3), "evenly"),
                          (dict(head_dim=7), "odd"), (dict(activation="relu"), "activation"),
                          (dict(family="gpt2", kv_heads=2), "KV heads"), (dict(family="gpt2", head_dim=4), "KV heads")]:
        with pytest.raises(UnsupportedModel, match=match):
            ModelShape(**{**LLAMA, **change})
    for bias in ("attention_bias", "mlp_bias"):
        with pytest.raises(UnsupportedModel, match=bias):
            shape_from_config(LlamaConfig(**{bias: True}))
    with pytest.raises(BadShape, match="no known group"):
        parameter_group("encoder.conv.weight")
    with pytest.raises(BadShape):
        kv_cache_bytes(PRESETS["gpt2"], -1)


def test_load_timing_refuses_a_missing_checksum():
    fields = dict(format="safetensors", file="model.safetensors", sha256="ab" * 32, run=0, import_s=1.0,
                  modelling_import_s=0.5, load_s=0.5, first_touch_s=0.1, second_touch_s=0.05, second_load_s=None,
                  parameters=10, evicted=False)
    assert json.loads(json.dumps(LoadTiming(**fields).to_dict()))["sha256"] == "ab" * 32
    with pytest.raises(InferlabError, match="sha256"):
        LoadTiming(**{**fields, "sha256": ""})
    with pytest.raises(InferlabError, match="parameters"):
        LoadTiming(**{**fields, "parameters": 0})


def test_fresh_process_load(tmp_path):
    from safetensors.torch import save_file
    config = LlamaConfig(vocab_size=97, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                         num_key_value_heads=2, intermediate_size=48, max_position_embeddings=64)
    model = LlamaForCausalLM(config)
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    save_file(state, tmp_path / "model.safetensors", metadata={"format": "pt"})
    config.save_pretrained(tmp_path)
    from inferlab.provenance import sha256_file
    real = sha256_file(tmp_path / "model.safetensors")
    timing = time_load_in_fresh_process("safetensors", tmp_path / "model.safetensors", real, again=True)
    assert timing.parameters == sum(p.numel() for p in model.parameters()) and timing.sha256 == real
    assert timing.load_s > 0 and timing.second_load_s > 0 and timing.import_s > 0
    assert timing.modelling_import_s > 0  # "llama", read from the config.json beside the file
    assert timing.first_touch_s > 0 and timing.second_touch_s > 0
    if Path("/proc/self/status").exists():
        assert set(timing.resident_mb) == {"file_load", "anon_load", "file_touch", "anon_touch"}
    if sys.platform.startswith("linux"):
        assert 0.0 <= timing.cached_before <= 1.0  # measured by mincore before the process started
    assert timing.stages == {}  # the timers inside the load are for GGUF files
    with pytest.raises(BadShape, match="modelling module"):
        time_load_in_fresh_process("safetensors", tmp_path / "model.safetensors", model_type="../x")
    with pytest.raises(InferlabError, match="changed"):  # the file is re-hashed: a wrong checksum is caught
        time_load_in_fresh_process("safetensors", tmp_path / "model.safetensors", "cd" * 32)
    with pytest.raises(BadShape, match="format"):
        time_load_in_fresh_process("pickle", tmp_path / "model.safetensors", "cd" * 32)


def test_fresh_process_without_a_record_is_a_clear_error(tmp_path, monkeypatch):
    import subprocess

    from inferlab.analysis import sizing
    (tmp_path / "model.safetensors").write_bytes(b"x")
    monkeypatch.setattr(sizing.subprocess, "run",
                        lambda *a, **k: subprocess.CompletedProcess(a, 0, stdout="", stderr="killed"))
    with pytest.raises(InferlabError, match="no timing record"):
        time_load_in_fresh_process("safetensors", tmp_path / "model.safetensors")


def test_checkers_accept_right_and_reject_wrong_answers():
    assert checks_ch02.check_weights_gb(26) and not checks_ch02.check_weights_gb(13)
    assert checks_ch02.check_copies(3) and not checks_ch02.check_copies(4)
    assert checks_ch02.check_flops_per_token(26) and not checks_ch02.check_flops_per_token(13)
    assert checks_ch02.check_min_time_us(86.7) and not checks_ch02.check_min_time_us(0.0867)
    assert checks_ch02.check_bandwidth_time_ms(13) and not checks_ch02.check_bandwidth_time_ms(1.3)
    assert checks_ch02.check_weights_gb(35, 70e9, "int4") and not checks_ch02.check_weights_gb(140, 70e9, "int4")
    assert checks_ch02.check_kv_gib(1.25) and not checks_ch02.check_kv_gib(10)
    assert checks_ch02.check_parameter_count(354_823_168) and not checks_ch02.check_parameter_count(345_000_000)


@pytest.mark.slow
def test_gguf_metadata_and_tensor_tables_of_the_bundled_file(bundled_gguf):
    from inferlab.analysis.sizing import gguf_metadata_bytes, gguf_tensor_types

    path = bundled_gguf
    from inferlab.analysis.sizing import gguf_reader

    reader = gguf_reader(path)  # one parse serves both tables
    meta = gguf_metadata_bytes(reader)
    assert "tokenizer.ggml.tokens" in meta and all(n > 0 for n in meta.values())
    types = gguf_tensor_types(reader)
    assert types == gguf_tensor_types(path)
    assert sum(r["parameters"] for r in types.values()) == PUBLISHED["smollm2-135m"]
    assert sum(meta.values()) + sum(r["bytes"] for r in types.values()) < path.stat().st_size


def _filesystem_type(path: Path) -> str:
    """The type of the file system that holds ``path``, from /proc/mounts ('' elsewhere)."""
    best, kind = "", ""
    for line in Path("/proc/mounts").read_text().splitlines() if Path("/proc/mounts").exists() else []:
        mount, fs_type = line.split()[1], line.split()[2]
        if str(path).startswith(mount) and len(mount) > len(best):
            best, kind = mount, fs_type
    return kind


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mincore and posix_fadvise as Linux has them")
def test_page_cache_residency_and_an_uncached_copy(tmp_path):
    from inferlab.analysis.sizing import cold_copy, evict_from_page_cache, page_cache_residency

    source = tmp_path / "src" / "model.safetensors"
    source.parent.mkdir()
    source.write_bytes(os.urandom(4 * 2**20))
    (source.parent / "config.json").write_text("{}")
    on_disk = _filesystem_type(tmp_path) not in ("tmpfs", "ramfs", "")  # a RAM-backed file system is its own cache
    copy = cold_copy(source, tmp_path / "copy")
    if on_disk:
        assert page_cache_residency(copy) < 0.1  # written to disk, mapped by no process, then dropped
    assert copy == tmp_path / "copy" / "model.safetensors" and (tmp_path / "copy" / "config.json").read_text() == "{}"
    assert copy.read_bytes() == source.read_bytes()  # reading puts every page in the page cache
    assert page_cache_residency(copy) == 1.0
    assert evict_from_page_cache(copy)
    if on_disk:
        assert page_cache_residency(copy) < 0.1
    with open(copy, "rb") as handle:
        handle.read(2**20)  # the first quarter
    assert page_cache_residency(copy) >= 0.25
    (tmp_path / "empty").write_bytes(b"")
    assert page_cache_residency(tmp_path / "empty") is None


def test_page_cache_residency_refuses_what_the_kernel_would_not_report(tmp_path, monkeypatch):
    from inferlab.analysis.sizing import page_cache_residency

    (tmp_path / "f").write_bytes(b"x" * 10)
    monkeypatch.setattr(os, "geteuid", lambda: 12345)  # neither root nor the owner...
    monkeypatch.setattr(os, "access", lambda *a, **k: False)  # ...and no write permission
    assert page_cache_residency(tmp_path / "f") is None


@pytest.mark.slow
def test_fresh_process_gguf_load_times_the_stages_inside_it(bundled_gguf):
    timing = time_load_in_fresh_process("gguf", bundled_gguf, model_type="llama")
    assert timing.parameters == PUBLISHED["smollm2-135m"]
    stages = timing.stages
    if "load_gguf_checkpoint_s" not in stages:
        pytest.skip("this transformers release does not load the file through load_gguf_checkpoint")
    assert stages["load_gguf_checkpoint_calls"] >= 1 and stages["dequantize_calls"] >= 1
    inner = stages["gguf_reader_s"] + stages["tensor_name_map_s"] + stages["dequantize_s"]
    assert 0 < inner <= stages["load_gguf_checkpoint_s"] <= timing.load_s
