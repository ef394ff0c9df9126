import pytest
import torch

from inferlab.errors import BadRequest
from inferlab.records import STAGES
from inferlab.runner import RealModelRunner

PROMPT = "An inference engine takes a trained model and a request, and it must turn them into"


def test_greedy_tokens_match_transformers_generate(smollm2):
    result = RealModelRunner(smollm2).generate(PROMPT, 12)
    ids = torch.tensor([result.prompt_ids])
    with torch.inference_mode():
        reference = smollm2.model.generate(ids, max_new_tokens=12, do_sample=False,
                                           attention_mask=torch.ones_like(ids), pad_token_id=0)
    assert result.token_ids == reference[0, ids.shape[1]:].tolist()
    assert result.text == smollm2.tokenizer.decode(result.token_ids)
    assert result.prompt_ids == smollm2.tokenizer(PROMPT, add_special_tokens=False).input_ids


def test_record_has_every_stage_no_simulation_and_provenance(smollm2):
    result = RealModelRunner(smollm2, threads=1).generate("Hello", 3)
    assert {t.stage for t in result.timings} == set(STAGES)
    assert len(result.step_seconds()) == 3 and result.simulated_stages == []
    meta = result.metadata
    assert meta["kv_cache"] is False and meta["provenance"]["threads"] == 1
    assert meta["provenance"]["sha256"] == smollm2.provenance.sha256


def test_threads_are_restored_after_a_run(smollm2):
    before = torch.get_num_threads()
    RealModelRunner(smollm2, threads=1).generate("Hi", 1)
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError):
        RealModelRunner(smollm2, threads=0)


def test_prompt_longer_than_the_context_is_refused_before_any_forward_pass(smollm2):
    long_prompt = "token " * 8200
    with pytest.raises(BadRequest, match="context holds 8192 positions"):
        RealModelRunner(smollm2).generate(long_prompt, 4)
    with pytest.raises(BadRequest, match="empty"):
        RealModelRunner(smollm2).generate(" ", 4)
