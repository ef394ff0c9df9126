import pytest
import torch

from inferlab.models import loaders, registry
from inferlab.errors import ModelUnavailable
from inferlab.models.registry import available_models, load_model, pick_device


def test_names():
    assert available_models() == ["gpt2", "gpt2-random", "smollm2-135m", "smollm2-135m-random", "default"]


@pytest.mark.parametrize("name", ["gpt3", "smollm2", "random", "gpt2-randomised"])
def test_unknown_models_are_refused_with_the_known_names(name):
    with pytest.raises(ModelUnavailable, match="unknown model.*smollm2-135m"):
        load_model(name)


def test_unknown_dtype_and_missing_gpu():
    with pytest.raises(ModelUnavailable, match="dtype"):
        load_model("smollm2-135m", dtype="float7")
    if not torch.cuda.is_available():
        with pytest.raises(ModelUnavailable, match="no CUDA"):
            pick_device("cuda")
        assert pick_device() == "cpu"


def test_default_falls_back_to_the_bundled_model_and_says_so(monkeypatch, capsys):
    def offline():
        raise ModelUnavailable("no hub here")

    monkeypatch.setitem(registry.REGISTRY, "gpt2", registry.ModelSpec("gpt2", "gpt2", "x", offline))
    loaded = load_model("default", verbose=True)
    assert loaded.name == "smollm2-135m"
    assert "default model: smollm2-135m (gpt2: no hub here)" in capsys.readouterr().out


def test_default_with_nothing_loadable_lists_every_reason(monkeypatch):
    def offline():
        raise ModelUnavailable("gone")

    for name in registry.DEFAULT_ORDER:
        monkeypatch.setitem(registry.REGISTRY, name, registry.ModelSpec(name, "", "", offline))
    with pytest.raises(ModelUnavailable, match="gpt2: gone\nsmollm2-135m: gone"):
        load_model("default")


def test_gpt2_random_has_the_exact_gpt2_shape_and_is_seeded():
    a = load_model("gpt2-random", seed=0)
    assert a.provenance.parameters == 124_439_808
    assert a.context == 1024 and a.model.config.n_layer == 12
    assert a.provenance.source == "random initialisation, seed 0"
    b = load_model("gpt2-random", seed=0)
    assert a.provenance.sha256 == b.provenance.sha256
    assert torch.equal(a.model.transformer.wte.weight, b.model.transformer.wte.weight)


def test_smollm2_and_its_random_twin_share_shape_and_tokenizer(smollm2):
    twin = load_model("smollm2-135m-random", seed=1)
    assert smollm2.provenance.parameters == twin.provenance.parameters == 134_515_008
    assert smollm2.provenance.tokenizer == twin.provenance.tokenizer
    assert smollm2.provenance.sha256 != twin.provenance.sha256
    assert smollm2.context == 8192


def test_loaded_model_provenance_is_complete(smollm2):
    p = smollm2.provenance
    assert p.model == "smollm2-135m" and len(p.sha256) == 64 and p.dtype == "float32"
    assert "49152 tokens" in p.tokenizer and p.device == "cpu"
    assert p.versions["transformers"] and p.extra["gguf_file"] == loaders.SMOLLM2_GGUF
