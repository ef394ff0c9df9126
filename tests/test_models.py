"""The native forward passes against transformers, their cost tables against FlopCounterMode (Chapter 4)."""
import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

from inferlab.errors import BadRequest, InferlabError
from inferlab.models import GPT2, Llama, NativeCausalLM, UnsupportedModel, causal_attention, from_config
from inferlab.analysis.flops import (OPS, Shape, cost_totals, counted_matmul_flops, forward_costs, profile_ops,
                                   time_last_only)

PROMPT = "An inference engine takes a trained model and a request, and it must turn them into"
TOL = 1e-4  # small random models: logits agree to float32 rounding


def tiny_gpt2(seed=0, **kw):
    torch.manual_seed(seed)
    args = dict(n_layer=2, n_embd=64, n_head=4, n_positions=64, vocab_size=120, bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(GPT2Config(**{**args, **kw})).eval()


def tiny_llama(seed=0, **kw):
    torch.manual_seed(seed)
    args = dict(num_hidden_layers=2, hidden_size=96, num_attention_heads=6, num_key_value_heads=2, head_dim=16,
                intermediate_size=160, vocab_size=120, max_position_embeddings=64, tie_word_embeddings=True,
                rope_theta=100_000.0)
    return LlamaForCausalLM(LlamaConfig(**{**args, **kw})).eval()


def hf_logits(model, ids):
    with torch.inference_mode():
        return model(ids).logits


@pytest.mark.parametrize("make,kind", [(tiny_gpt2, GPT2), (tiny_llama, Llama),
                                       (lambda: tiny_llama(tie_word_embeddings=False), Llama),
                                       (lambda: tiny_llama(num_key_value_heads=1), Llama),
                                       (lambda: tiny_llama(num_key_value_heads=6), Llama),
                                       (lambda: tiny_gpt2(activation_function="gelu"), GPT2)])
def test_small_models_match_transformers_logits(make, kind):
    hf = make()
    native = NativeCausalLM.from_hf(hf)
    assert isinstance(native, kind)
    ids = torch.randint(0, 120, (3, 23), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        ours = native(ids)
        last = native.last_logits(ids)
    assert ours.shape == (3, 23, 120) and last.shape == (3, 120)
    torch.testing.assert_close(ours, hf_logits(hf, ids), rtol=0, atol=TOL)
    torch.testing.assert_close(last, ours[:, -1], rtol=0, atol=TOL)


def test_a_wrong_weight_changes_the_logits():
    hf = tiny_llama()
    state = {k: v.clone() for k, v in hf.state_dict().items()}
    state["model.layers.1.self_attn.k_proj.weight"][0, 0] += 1.0
    native = from_config(hf.config, state)
    ids = torch.randint(0, 120, (1, 16), generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        assert (native(ids) - hf_logits(hf, ids)).abs().max() > 1e-3


def test_neighbour_pairing_in_rope_is_caught_by_the_logit_comparison(monkeypatch):
    # Pairing dimensions (0, 1), (2, 3), ... instead of (i, i + d/2): every shape stays right, the logits do not.
    import inferlab.models.llama as llama

    def neighbour_rope(x, cos, sin):
        half = x.shape[-1] // 2
        c, s_ = cos[..., :half].to(x.dtype), sin[..., :half].to(x.dtype)  # one angle per pair
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack([even * c - odd * s_, even * s_ + odd * c], dim=-1).flatten(-2)

    hf = tiny_llama()
    ids = torch.randint(0, 120, (1, 16), generator=torch.Generator().manual_seed(2))
    right = (NativeCausalLM.from_hf(hf)(ids) - hf_logits(hf, ids)).abs().max()
    monkeypatch.setattr(llama, "apply_rope", neighbour_rope)
    with torch.inference_mode():
        wrong = (NativeCausalLM.from_hf(hf)(ids) - hf_logits(hf, ids)).abs().max()
    assert right < TOL and wrong > 10 * TOL


def test_positions_matter_and_the_mask_is_causal():
    for hf in (tiny_gpt2(), tiny_llama()):
        native = NativeCausalLM.from_hf(hf)
        ids = torch.randint(0, 120, (1, 20), generator=torch.Generator().manual_seed(3))
        with torch.inference_mode():
            full = native(ids)
            changed = ids.clone()
            changed[0, 12] = (changed[0, 12] + 1) % 120
            after = native(changed)
            swapped = native(ids.flip(1))
        torch.testing.assert_close(after[:, :12], full[:, :12], rtol=0, atol=1e-6)  # the past cannot see the future
        assert (after[:, 12:] - full[:, 12:]).abs().max() > 1e-4
        assert (swapped[0, -1] - full[0, -1]).abs().max() > 1e-4  # same bag of tokens, other order


def test_grouped_attention_equals_repeated_heads():
    g = torch.Generator().manual_seed(4)
    q, k, v = torch.randn(2, 6, 9, 8, generator=g), torch.randn(2, 2, 9, 8, generator=g), torch.randn(2, 2, 9, 8, generator=g)
    ours = causal_attention(q, k, v)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k.repeat_interleave(3, 1), v.repeat_interleave(3, 1),
                                                           is_causal=True)
    torch.testing.assert_close(ours, ref, rtol=0, atol=1e-5)
    with pytest.raises(UnsupportedModel, match="evenly"):
        causal_attention(q, k[:, :1].expand(2, 4, 9, 8), v[:, :1].expand(2, 4, 9, 8))


def test_bad_inputs_are_refused_clearly():
    native = NativeCausalLM.from_hf(tiny_gpt2())
    for bad, match in [([[1, 2]], "integer torch.Tensor"), (torch.tensor([1, 2]), "shape"),
                       (torch.zeros(1, 0, dtype=torch.long), "shape"), (torch.ones(1, 65, dtype=torch.long), "exceed"),
                       (torch.tensor([[1, 120]]), r"\[0, 120\)"), (torch.tensor([[1.0, 2.0]]), "integer")]:
        with pytest.raises(BadRequest, match=match):
            native(bad)
    with pytest.raises(BadRequest, match="one sequence"):
        native.greedy(torch.ones(2, 3, dtype=torch.long), 2)
    with pytest.raises(BadRequest, match="at least 1"):
        native.greedy(torch.ones(1, 3, dtype=torch.long), 0)
    with pytest.raises(BadRequest, match="exceed"):  # 60 + 5 > 64 positions: refused before any step runs
        native.greedy(torch.ones(1, 60, dtype=torch.long), 5)


def test_unsupported_configs_and_state_dicts_are_refused():
    with pytest.raises(UnsupportedModel, match="model_type"):
        from_config(type("C", (), {"model_type": "mamba"})(), {})
    with pytest.raises(UnsupportedModel, match="activation"):
        GPT2(GPT2Config(activation_function="relu"))
    with pytest.raises(UnsupportedModel, match="RoPE variant"):
        Llama(LlamaConfig(hidden_size=64, num_attention_heads=4, rope_scaling={"rope_type": "linear", "factor": 2.0}))
    hf = tiny_llama()
    state = dict(hf.state_dict())
    state["lm_head.weight"] = state["lm_head.weight"] + 1.0
    with pytest.raises(UnsupportedModel, match="tied"):
        from_config(hf.config, state)
    state = dict(hf.state_dict())
    del state["model.norm.weight"]
    with pytest.raises(UnsupportedModel, match="missing"):
        from_config(hf.config, state)
    assert issubclass(UnsupportedModel, InferlabError)


def test_native_greedy_matches_transformers_generate_on_a_small_model():
    hf = tiny_llama(seed=5)
    native = NativeCausalLM.from_hf(hf)
    ids = torch.randint(3, 120, (1, 7), generator=torch.Generator().manual_seed(6))
    with torch.inference_mode():
        ref = hf.generate(ids, max_new_tokens=10, do_sample=False, attention_mask=torch.ones_like(ids),
                          pad_token_id=0, eos_token_id=None)
    assert native.greedy(ids, 10) == ref[0, 7:].tolist()


@pytest.mark.parametrize("make", [tiny_gpt2, tiny_llama, lambda: tiny_llama(tie_word_embeddings=False)])
@pytest.mark.parametrize("seq,batch,last_only", [(1, 1, False), (17, 2, False), (17, 2, True)])
def test_analytic_matmul_flops_equal_flop_counter(make, seq, batch, last_only):
    hf = make()
    native = NativeCausalLM.from_hf(hf)
    ids = torch.randint(0, 120, (batch, seq))
    costs = {c.op: c for c in forward_costs(hf.config, seq, batch, last_only)}
    counted = counted_matmul_flops(native, ids, last_only=last_only)
    assert counted == {"attn_proj": costs["attn_proj"].matmul_flops, "mlp": costs["mlp"].matmul_flops,
                       "scores+context": costs["scores"].matmul_flops + costs["context"].matmul_flops,
                       "lm_head": costs["lm_head"].matmul_flops}
    assert all(costs[op].matmul_flops == 0 for op in ("embedding", "norm", "rope", "softmax", "residual"))


def test_cost_table_by_hand_for_one_gpt2_layer():
    config = GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=10, n_positions=16)
    c = {x.op: x for x in forward_costs(config, seq=4)}
    assert c["attn_proj"].matmul_flops == 2 * 4 * 8 * 24 + 2 * 4 * 8 * 8
    assert c["scores"].matmul_flops == c["context"].matmul_flops == 2 * 2 * 4 * 4 * 4
    assert c["mlp"].matmul_flops == 2 * (2 * 4 * 8 * 32)
    assert c["lm_head"].matmul_flops == 2 * 4 * 8 * 10
    assert c["softmax"].other_flops == 6 * 2 * 4 * 4 and c["rope"].flops == 0
    assert c["lm_head"].bytes == 4 * (4 * 8 + 8 * 10 + 4 * 10)
    assert cost_totals(list(c.values()))["flops"] == sum(x.flops for x in c.values())
    with pytest.raises(BadRequest):
        forward_costs(config, seq=0)
    with pytest.raises(BadRequest, match="context"):
        forward_costs(config, seq=17)
    assert forward_costs(config, seq=16)
    assert Shape.of(LlamaConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=2)).kv_heads == 2


def test_profile_covers_every_op_and_last_only_saves_work():
    native = NativeCausalLM.from_hf(tiny_llama())
    ids = torch.randint(0, 120, (1, 32))
    seconds = profile_ops(native, ids, repeats=2)
    assert set(OPS) <= set(seconds) and seconds["forward"] > 0
    assert all(seconds[op] > 0 for op in OPS)
    assert sum(seconds[op] for op in OPS) <= seconds["forward"] * 1.001
    result = time_last_only(native, ids, repeats=3)
    assert len(result["full_s"]) == len(result["last_s"]) == len(result["pair_ratios"]) == 3
    assert result["pair_ratios"][1] == result["full_s"][1] / result["last_s"][1]
    assert result["same_argmax"] and result["max_abs_diff"] < TOL
    full = cost_totals(forward_costs(native.config, 32))["flops"]
    last = cost_totals(forward_costs(native.config, 32, last_only=True))["flops"]
    assert last < full


@pytest.mark.slow
def test_smollm2_full_size_logits_and_greedy_tokens(smollm2):
    native = NativeCausalLM.from_hf(smollm2.model)
    ids = smollm2.tokenizer(PROMPT, return_tensors="pt", add_special_tokens=False).input_ids
    torch.testing.assert_close(native(ids), hf_logits(smollm2.model, ids), rtol=0, atol=1e-3)
    with torch.inference_mode():
        ref = smollm2.model.generate(ids, max_new_tokens=16, do_sample=False, attention_mask=torch.ones_like(ids),
                                     pad_token_id=0)
    assert native.greedy(ids, 16) == ref[0, ids.shape[1]:].tolist()


def test_exercise_checkers_accept_right_and_reject_wrong_answers():
    from inferbook.checks.ch04 import check_norm, check_wasted_head_flops

    def rmsnorm(x, w, eps):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

    def layernorm(x, w, b, eps):
        mu, var = x.mean(-1, keepdim=True), x.var(-1, keepdim=True, unbiased=False)
        return (x - mu) / torch.sqrt(var + eps) * w + b

    assert check_norm(rmsnorm) and check_norm(layernorm, kind="layernorm")
    assert not check_norm(lambda x, w, eps: x / x.abs().mean(-1, keepdim=True) * w)  # mean |x|, not RMS
    assert not check_norm(lambda x, w, b, eps: rmsnorm(x, w, eps) + b, kind="layernorm")
    with pytest.raises(BadRequest):
        check_norm(rmsnorm, kind="batchnorm")
    config = LlamaConfig(hidden_size=576, num_attention_heads=9, num_key_value_heads=3, vocab_size=49_152,
                         intermediate_size=1536, num_hidden_layers=30)
    assert check_wasted_head_flops(2 * 576 * 49_152 * 199, config, seq=200)
    assert not check_wasted_head_flops(2 * 576 * 49_152 * 200 * 1.05, config, seq=200)
