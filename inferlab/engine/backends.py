"""Backends: a model, its tokenizer and its end-of-sequence ids, as one thing the engine runs (Chapter 6).

The engine needs three things from a backend: a tokenizer (``tokenize``, ``convert_tokens_to_ids``,
``decode``), a model with the seam of :class:`inferlab.engine.runner.CausalLM`, and the ids that end
a sequence. The backends of the book run different forward passes (Chapter 10 adds a decode-optimised
one); everything around the forward pass is the same engine, which is what makes their tokens and
timings comparable.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from inferlab.engine.runner import CausalLM
from inferlab.models.registry import LoadedModel
from inferlab.models.toy import TOY_SIMULATED_STAGES, ToyModel, ToyTokenizer


@dataclass
class Backend:
    """A model behind the engine: its forward, tokenizer, stop ids, device and identity (Chapter 6)."""

    name: str
    model: CausalLM
    tokenizer: Any
    eos_token_ids: frozenset[int]
    device: str
    #: Where the weights came from and which forward pass runs them, for every result's record.
    provenance: dict[str, Any]
    #: Whether the LM head projects only the last position (Chapter 4) or every position.
    last_only: bool = True
    simulated_stages: tuple[str, ...] = field(default_factory=tuple)


def end_of_sequence_ids(loaded: LoadedModel) -> frozenset[int]:
    """Every id that ends generation: the tokenizer's and the generation config's (Chapter 6).

    A set, because a generation config may list several: Llama 3.1 8B Instruct's lists three
    (https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/blob/main/generation_config.json).
    SmolLM2-135M-Instruct's gives one, ``<|im_end|>``, the tokenizer's own end-of-sequence token;
    its ``<|endoftext|>`` is not among them.
    """
    ids = {loaded.tokenizer.eos_token_id}
    config = getattr(loaded.model, "generation_config", None)
    configured = getattr(config, "eos_token_id", None)
    ids.update(configured if isinstance(configured, (list, tuple)) else [configured])
    return frozenset(i for i in ids if i is not None)


def toy_backend(seed: int = 7) -> Backend:
    """Chapter 1's toy: a seeded table as the model, one character per token (Chapter 6)."""
    model = ToyModel(seed=seed)
    return Backend(name=f"toy (seed {seed})", model=model, tokenizer=ToyTokenizer(model.vocabulary),
                   eos_token_ids=frozenset(), device="cpu",
                   provenance={"backend": "toy", "seed": seed, "vocabulary_size": model.vocab_size},
                   last_only=True, simulated_stages=TOY_SIMULATED_STAGES)


def transformers_backend(loaded: LoadedModel, last_only: bool = False) -> Backend:
    """transformers' own forward pass; by default it projects every position, as a plain call does (Chapter 6)."""
    from inferlab.models.hf import TransformersLM

    return Backend(name=f"transformers ({loaded.name})", model=TransformersLM(loaded.model, loaded.context),
                   tokenizer=loaded.tokenizer, eos_token_ids=end_of_sequence_ids(loaded), device=loaded.device,
                   provenance={"backend": "transformers", **loaded.provenance.to_dict()}, last_only=last_only)


def native_backend(loaded: LoadedModel, last_only: bool = True) -> Backend:
    """The lab's own forward pass from Chapter 4, on a copy of the same weights (Chapter 6).

    With ``last_only`` (the default) the LM head projects only the last position, which is all
    generation needs; ``last_only=False`` projects every position, so the two settings isolate the
    cost of that one shortcut.
    """
    from inferlab.models.build import native_from_hf

    suffix = "" if last_only else ", full LM head"
    return Backend(name=f"native ({loaded.name}{suffix})", model=native_from_hf(loaded.model),
                   tokenizer=loaded.tokenizer, eos_token_ids=end_of_sequence_ids(loaded), device=loaded.device,
                   provenance={"backend": "native (inferlab.models)", **loaded.provenance.to_dict()},
                   last_only=last_only)


def decode_backend(loaded: LoadedModel, layout: str = "in_out", compiled: bool = False,
                   quantization: str | None = None) -> Backend:
    """The decode-optimised native model of Chapter 10 on a copy of the same weights (Chapter 10).

    ``layout`` is one of :data:`inferlab.models.decode.LAYOUTS`; ``compiled`` compiles its
    single-position step with ``torch.compile`` (any layout; ``"streamed"`` only pays compiled; which
    compiled layout is faster depends on the processor: ``inferlab bench decode`` measures both;
    compile again after changing the thread count). Run it with ``Engine(..., kv_cache="static")``.
    ``quantization`` (Chapter 12) is a format of :data:`inferlab.models.quantized.FORMATS`: the
    weight matrices become packed codes (the layout is then ``"streamed"``, and ``compiled`` is
    what makes it fast).
    """
    from inferlab.models.build import native_from_hf
    from inferlab.models.decode import compile_decode, decode_optimised
    from inferlab.models.quantized import quantize_decode

    if quantization is not None:
        layout = "streamed"
    model = decode_optimised(native_from_hf(loaded.model), layout)
    if quantization is not None:
        quantize_decode(model, quantization)
    if compiled:
        compile_decode(model)
    suffix = f"{layout} layout{', ' + quantization if quantization else ''}{', compiled' if compiled else ''}"
    return Backend(name=f"native decode-optimised ({loaded.name}, {suffix})", model=model,
                   tokenizer=loaded.tokenizer, eos_token_ids=end_of_sequence_ids(loaded), device=loaded.device,
                   provenance={"backend": f"native decode-optimised (inferlab.models.decode), {suffix}",
                               **loaded.provenance.to_dict()})
