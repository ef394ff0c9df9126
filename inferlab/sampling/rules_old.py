"""Decoding rules: logits processors, samplers, a generation loop and beam search (Chapter 5).

A decoding rule turns the logits of the last position into the next token. It is built from two
kinds of parts with one small interface each:

* a **processor** is ``processor(input_ids, logits) -> logits``: it rescales or masks scores
  (temperature, top-k, top-p, min-p, repetition penalty). Removed tokens get ``-inf``.
* a **sampler** is ``sampler(logits, generators) -> ids``: it picks one token per row (greedy
  argmax, or a multinomial draw from the softmax with one seeded ``torch.Generator`` per row).

``input_ids`` has shape ``(batch, length)`` and ``logits`` ``(batch, vocab)``; a single
sequence may also be passed as 1-D tensors. Processors never change the forward pass: every rule
here reuses the same logits, which is why choosing a rule changes the text and not the cost
(beam search is the exception: it runs the model over several sequences per step).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from inferlab.compat import cache_kwargs, output_cache
from inferlab.errors import BadRequest
from inferlab.records import GenerationResult
from inferlab.models.registry import LoadedModel
from inferlab.request import check_context, parse_request
from inferlab.timing import StageClock

NEG_INF = float("-inf")
#: The smallest temperature accepted: below it, float32 logits divided by T overflow to infinities and
#: the softmax returns NaN (for the limit T -> 0, use greedy decoding).
MIN_TEMPERATURE = 1e-4


def _as_batch(input_ids: Any, logits: Any) -> tuple[Any, Any, bool]:
    """Give 1-D inputs a batch dimension; report whether they had one (Chapter 5)."""
    single = logits.dim() == 1
    if single:
        logits = logits.unsqueeze(0)
        if input_ids is not None and input_ids.dim() == 1:
            input_ids = input_ids.unsqueeze(0)
    return input_ids, logits, single


def _check_keep(min_tokens_to_keep: object) -> None:
    if isinstance(min_tokens_to_keep, bool) or not isinstance(min_tokens_to_keep, int) or min_tokens_to_keep < 1:
        raise BadRequest(f"min_tokens_to_keep must be a whole number of at least 1, got {min_tokens_to_keep!r}")


def _keep_at_least(logits: Any, remove: Any, count: int) -> Any:
    """Unmark the ``count`` highest-scoring tokens of each row in ``remove`` (Chapter 5)."""
    import torch

    if count == 1:  # top-p and min-p never remove the most probable token: nothing to do
        return remove
    count = min(count, logits.shape[-1])
    top = torch.topk(logits, count, dim=-1).indices
    return remove.scatter(-1, top, False)


@runtime_checkable
class LogitsProcessor(Protocol):
    """Anything that maps ``(input_ids, logits)`` to new logits of the same shape (Chapter 5)."""

    def __call__(self, input_ids: Any, logits: Any) -> Any:
        """Return processed logits; removed tokens are ``-inf``."""
        ...


@dataclass(frozen=True)
class Temperature:
    """Divide the logits by ``temperature`` (at least ``MIN_TEMPERATURE``): below 1 sharpens, above 1 flattens (Chapter 5)."""

    temperature: float

    def __post_init__(self) -> None:
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not t > 0 or t == float("inf"):
            raise BadRequest(
                f"temperature must be a finite number greater than 0, got {t!r}; "
                "for the most probable token every time, use greedy decoding (do_sample=False)"
            )
        if t < MIN_TEMPERATURE:
            raise BadRequest(
                f"temperature {t!r} is below {MIN_TEMPERATURE:g}: float32 logits divided by it overflow and the "
                "probabilities become NaN; for the most probable token every time, use greedy decoding (do_sample=False)"
            )

    def __call__(self, input_ids: Any, logits: Any) -> Any:
        return logits / float(self.temperature)


@dataclass(frozen=True)
class TopK:
    """Keep the ``k`` highest logits, and every token tied with the k-th; mask the rest (Chapter 5)."""

    k: int
    min_tokens_to_keep: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise BadRequest(f"top_k must be a whole number of at least 1, got {self.k!r}")
        _check_keep(self.min_tokens_to_keep)

    def __call__(self, input_ids: Any, logits: Any) -> Any:
        import torch

        _, scores, single = _as_batch(None, logits)
        k = min(max(self.k, self.min_tokens_to_keep), scores.shape[-1])
        kth = torch.topk(scores, k, dim=-1).values[..., -1:]  # the k-th largest value of each row
        out = scores.masked_fill(scores < kth, NEG_INF)      # ties with the k-th value survive
        return out[0] if single else out


@dataclass(frozen=True)
class TopP:
    """Nucleus: keep the most probable tokens until their mass reaches ``p`` (Chapter 5).

    A token is kept when the probability of the tokens strictly more probable than it is below
    ``p``, so tokens tied in probability are kept or removed together; ``p = 1`` keeps all.
    This departs from transformers' ``TopPLogitsWarper`` on exact ties only: transformers ranks tied
    tokens by their position in a sort and may keep some of a tie and drop the rest (logits
    ``[2, 1, 1, 0]`` at ``p = 0.7``: transformers keeps ids 0 and 2, the lab ids 0, 1 and 2).
    """

    p: float
    min_tokens_to_keep: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.p, bool) or not isinstance(self.p, (int, float)) or not 0 < self.p <= 1:
            raise BadRequest(f"top_p must be in (0, 1], got {self.p!r}")
        _check_keep(self.min_tokens_to_keep)

    def __call__(self, input_ids: Any, logits: Any) -> Any:
        import torch

        _, scores, single = _as_batch(None, logits)
        if self.p >= 1.0:
            return logits
        sorted_probs, order = torch.sort(torch.softmax(scores, dim=-1), dim=-1, descending=True)
        before = sorted_probs.cumsum(dim=-1) - sorted_probs  # mass of the tokens ranked before each one
        # tokens tied in probability all get the mass above the first of them
        new_value = torch.ones_like(sorted_probs, dtype=torch.bool)
        new_value[..., 1:] = sorted_probs[..., 1:] != sorted_probs[..., :-1]
        positions = torch.arange(sorted_probs.shape[-1], device=scores.device).expand_as(sorted_probs)
        first_of_value = torch.where(new_value, positions, 0).cummax(dim=-1).values
        remove_sorted = before.gather(-1, first_of_value) >= self.p
        remove = torch.zeros_like(remove_sorted).scatter(-1, order, remove_sorted)
        remove = _keep_at_least(scores, remove, self.min_tokens_to_keep)
        out = scores.masked_fill(remove, NEG_INF)
        return out[0] if single else out


@dataclass(frozen=True)
class MinP:
    """Keep tokens whose probability is at least ``p`` times the top token's (Chapter 5)."""

    p: float
    min_tokens_to_keep: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.p, bool) or not isinstance(self.p, (int, float)) or not 0 <= self.p <= 1:
            raise BadRequest(f"min_p must be in [0, 1], got {self.p!r}")
        _check_keep(self.min_tokens_to_keep)

    def __call__(self, input_ids: Any, logits: Any) -> Any:
        import torch

        _, scores, single = _as_batch(None, logits)
        probs = torch.softmax(scores, dim=-1)
        threshold = self.p * probs.amax(dim=-1, keepdim=True)
        remove = _keep_at_least(scores, probs < threshold, self.min_tokens_to_keep)
        out = scores.masked_fill(remove, NEG_INF)
        return out[0] if single else out


@dataclass(frozen=True)
class RepetitionPenalty:
    """Make every token already in ``input_ids`` less likely: divide a positive logit by ``penalty``,
    multiply a negative one (Chapter 5). Counts each token once, the prompt included."""

    penalty: float

    def __post_init__(self) -> None:
        p = self.penalty
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not p > 0 or p == float("inf"):
            raise BadRequest(f"repetition_penalty must be a finite number greater than 0, got {p!r} (1.0 is no penalty)")

    def __call__(self, input_ids: Any, logits: Any) -> Any:
        import torch

        ids, scores, single = _as_batch(input_ids, logits)
        seen = torch.zeros_like(scores, dtype=torch.bool).scatter(-1, ids.long(), True)
        penalised = torch.where(scores < 0, scores * self.penalty, scores / self.penalty)
        out = torch.where(seen, penalised, scores)
        return out[0] if single else out


def apply_processors(processors: Sequence[LogitsProcessor], input_ids: Any, logits: Any) -> Any:
    """Run processors in order, each on the previous one's output (Chapter 5)."""
    for processor in processors:
        logits = processor(input_ids, logits)
    return logits


def make_generator(seed: int, device: str = "cpu") -> Any:
    """A fresh ``torch.Generator`` seeded for one request: the same seed gives the same draws (Chapter 5)."""
    import torch

    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise BadRequest(f"seed must be a whole number of at least 0, got {seed!r}")
    return torch.Generator(device=device).manual_seed(seed)


class Greedy:
    """Pick the highest logit of each row; ties go to the smallest id (Chapter 5)."""

    def __call__(self, logits: Any, generators: Sequence[Any] | None = None) -> Any:
        import torch

        return torch.argmax(logits, dim=-1)


class Multinomial:
    """Draw one token per row from the softmax of the logits, row ``i`` with ``generators[i]`` (Chapter 5)."""

    def __call__(self, logits: Any, generators: Sequence[Any] | None = None) -> Any:
        import torch

        probs = torch.softmax(logits.float(), dim=-1)
        if probs.dim() == 1:
            generator = generators[0] if generators else None
            return torch.multinomial(probs, 1, generator=generator)[0]
        if generators is not None and len(generators) != probs.shape[0]:
            raise BadRequest(f"{probs.shape[0]} rows need {probs.shape[0]} generators, got {len(generators)}")
        rows = [torch.multinomial(probs[i:i + 1], 1, generator=generators[i] if generators else None)[0]
                for i in range(probs.shape[0])]
        return torch.cat(rows)


@dataclass(frozen=True)
class DecodingRule:
    """A complete rule with transformers' parameter names and order of application (Chapter 5).

    Greedy when ``do_sample`` is false (only the repetition penalty then applies); otherwise the
    repetition penalty, temperature, top-k, top-p and min-p, in that order, then a draw. Each part
    keeps the same tokens as transformers' processor, except top-p on exact ties (see :class:`TopP`).
    """

    do_sample: bool = False
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    processors: tuple[LogitsProcessor, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        parts: list[LogitsProcessor] = []
        if self.repetition_penalty is not None and self.repetition_penalty != 1.0:
            parts.append(RepetitionPenalty(self.repetition_penalty))
        warpers: list[LogitsProcessor] = []
        temperature = Temperature(self.temperature)  # validated even when greedy: a bad value is an error
        if self.temperature != 1.0:
            warpers.append(temperature)
        if self.top_k is not None:
            warpers.append(TopK(self.top_k))
        if self.top_p is not None and self.top_p < 1.0:
            warpers.append(TopP(self.top_p))
        elif self.top_p is not None:
            TopP(self.top_p)
        if self.min_p is not None:
            warpers.append(MinP(self.min_p))
        if self.do_sample:
            parts += warpers
        object.__setattr__(self, "processors", tuple(parts))

    @property
    def sampler(self) -> Greedy | Multinomial:
        """The sampler this rule ends with (Chapter 5)."""
        return Multinomial() if self.do_sample else Greedy()

    def label(self) -> str:
        """A short name such as ``'T=0.7, top_p=0.9'`` or ``'greedy'`` (Chapter 5)."""
        parts = [] if self.do_sample else ["greedy"]
        if self.do_sample and self.temperature != 1.0:
            parts.append(f"T={self.temperature:g}")
        for name in ("top_k", "top_p", "min_p", "repetition_penalty"):
            value = getattr(self, name)
            if value is not None and (self.do_sample or name == "repetition_penalty"):
                parts.append(f"{name}={value:g}")
        return ", ".join(parts) or "T=1"

    def hf_kwargs(self) -> dict[str, Any]:
        """The same rule as keyword arguments of transformers' ``generate`` (Chapter 5)."""
        kwargs: dict[str, Any] = {"do_sample": self.do_sample}
        if self.repetition_penalty is not None:
            kwargs["repetition_penalty"] = float(self.repetition_penalty)
        if self.do_sample:
            kwargs.update(temperature=float(self.temperature), top_k=self.top_k or 0,
                          top_p=1.0 if self.top_p is None else float(self.top_p))
            if self.min_p is not None:
                kwargs["min_p"] = float(self.min_p)
        return kwargs

    def next_tokens(self, input_ids: Any, logits: Any, generators: Sequence[Any] | None = None) -> Any:
        """Process the last position's logits of each row and pick one token per row (Chapter 5)."""
        return self.sampler(apply_processors(self.processors, input_ids, logits), generators)

    def distribution(self, input_ids: Any, logits: Any) -> Any:
        """The probabilities the sampler would draw from (one-hot for greedy) (Chapter 5)."""
        import torch

        processed = apply_processors(self.processors, input_ids, logits)
        if not self.do_sample:
            return torch.nn.functional.one_hot(torch.argmax(processed, dim=-1), processed.shape[-1]).float()
        return torch.softmax(processed.float(), dim=-1)


def generate_with(loaded: LoadedModel, prompt: str, max_new_tokens: int, rule: DecodingRule,
                  seed: int | None = None, use_cache: bool = False, stop_at_eos: bool = False) -> GenerationResult:
    """One request under any decoding rule, every stage timed as in Chapter 1's runner (Chapter 5).

    ``seed`` seeds a ``torch.Generator`` that belongs to this request alone, so the same seed gives
    the same tokens whatever else runs in the process. Sampling without a seed is refused.
    ``use_cache`` keeps transformers' KV cache between steps (the same tokens, less work; Chapter 9).
    """
    import torch

    if rule.do_sample and seed is None:
        raise BadRequest("a sampling rule needs a seed: pass seed=<int> so that the request can be repeated")
    tokenizer, device, model = loaded.tokenizer, loaded.device, loaded.model
    clock = StageClock(device)
    with clock.stage("request_parse"):
        request = parse_request(prompt, max_new_tokens)
        generators = [make_generator(seed, device)] if seed is not None else None
    with clock.stage("tokenize"):
        pieces = tokenizer.tokenize(request.prompt)
    with clock.stage("encode"):
        prompt_ids = tokenizer.convert_tokens_to_ids(pieces)
        check_context(len(prompt_ids), request.max_new_tokens, loaded.context)
        ids = torch.tensor([prompt_ids], device=device)
    new_ids: list[int] = []
    past = None
    stop_reason = "length"
    with torch.inference_mode():
        for step in range(request.max_new_tokens):
            with clock.stage("forward_pass", step):
                if use_cache:
                    out = model(input_ids=ids if past is None else ids[:, -1:], use_cache=True, **cache_kwargs(past))
                    past = output_cache(out)
                else:
                    out = model(input_ids=ids, use_cache=False)
                logits = out.logits[:, -1].float()
            with clock.stage("sample", step):
                next_id = rule.next_tokens(ids, logits, generators)
                ids = torch.cat([ids, next_id.view(1, 1)], dim=1)
            new_ids.append(int(next_id))
            if stop_at_eos and new_ids[-1] == tokenizer.eos_token_id:
                stop_reason = "eos"
                break
    with clock.stage("decode"):
        tokens = tokenizer.convert_ids_to_tokens(new_ids)
        text = tokenizer.decode(new_ids)
    with clock.stage("response_format"):
        metadata = {"generator": "real", "decoding": rule.label(), "seed": seed, "kv_cache": use_cache,
                    "stop_reason": stop_reason,
                    "provenance": loaded.provenance.with_run(device, torch.get_num_threads()).to_dict()}
    return GenerationResult(prompt=request.prompt, prompt_ids=list(prompt_ids), token_ids=new_ids, tokens=tokens,
                            text=text, timings=clock.timings, simulated_stages=[], metadata=metadata)


def sample_many(loaded: LoadedModel, prompt: str, max_new_tokens: int, rule: DecodingRule,
                seeds: Sequence[int]) -> list[list[int]]:
    """``len(seeds)`` continuations of one prompt in one batch, row ``i`` drawn with ``seeds[i]`` (Chapter 5).

    Uses transformers' KV cache: the prompt is run once and its cache copied to every row, then
    each step runs one new token per row. Every row has exactly ``max_new_tokens`` tokens (no stop
    at end-of-sequence), so that repetition and diversity are measured over equal lengths.
    """
    import torch

    request = parse_request(prompt, max_new_tokens)
    if not seeds:
        raise BadRequest("sample_many needs at least one seed")
    tokenizer, device, model = loaded.tokenizer, loaded.device, loaded.model
    prompt_ids = tokenizer(request.prompt, add_special_tokens=False).input_ids
    check_context(len(prompt_ids), request.max_new_tokens, loaded.context)
    generators = [make_generator(s, device) for s in seeds]
    rows = len(seeds)
    ids = torch.tensor([prompt_ids], device=device).repeat(rows, 1)
    with torch.inference_mode():
        out = model(input_ids=ids[:1], use_cache=True)
        past = output_cache(out)
        past.batch_repeat_interleave(rows)
        logits = out.logits[:, -1].float().repeat(rows, 1)
        for step in range(request.max_new_tokens):
            next_ids = rule.next_tokens(ids, logits, generators)
            ids = torch.cat([ids, next_ids.view(rows, 1)], dim=1)
            if step + 1 < request.max_new_tokens:
                out = model(input_ids=ids[:, -1:], use_cache=True, **cache_kwargs(past))
                past, logits = output_cache(out), out.logits[:, -1].float()
    return ids[:, len(prompt_ids):].tolist()


@dataclass
class BeamResult:
    """What :func:`beam_search` returns: best sequence first, with scores and the work done (Chapter 5)."""

    sequences: list[list[int]]
    scores: list[float]
    steps: int
    rows_forwarded: int


def beam_search(model: Any, prompt_ids: Sequence[int], num_beams: int, max_new_tokens: int,
                eos_token_id: int | Sequence[int] | None = None, length_penalty: float = 1.0,
                early_stopping: bool | str = False) -> BeamResult:
    """Beam search with the rules of transformers' ``generate(num_beams=..., do_sample=False)`` (Chapter 5).

    At every step each running beam is extended by every token; of the ``2 * num_beams`` best
    extensions (by summed log-probability), those among the first ``num_beams`` that end in
    end-of-sequence, or reach the length limit, become finished hypotheses scored by
    ``sum_logprobs / generated_length ** length_penalty``; the best ``num_beams`` unfinished ones keep
    running. ``early_stopping``: ``True`` stops once ``num_beams`` hypotheses are finished; ``False``
    stops when the best running beam, scored at its current length, cannot beat the worst finished
    one; ``"never"`` scores it at the maximum length instead when ``length_penalty > 0``. No KV cache:
    every step runs the model over all running beams, which is the cost this rule adds.
    """
    import torch

    if isinstance(num_beams, bool) or not isinstance(num_beams, int) or num_beams < 1:
        raise BadRequest(f"num_beams must be a whole number of at least 1, got {num_beams!r}")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise BadRequest(f"max_new_tokens must be a whole number of at least 1, got {max_new_tokens!r}")
    if early_stopping not in (True, False, "never"):
        raise BadRequest(f"early_stopping must be True, False or 'never', got {early_stopping!r}")
    prompt_ids = [int(t) for t in prompt_ids]
    if not prompt_ids:
        raise BadRequest("beam_search needs a prompt of at least one token")
    config = getattr(model, "config", None)
    context = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    if context is not None and len(prompt_ids) + max_new_tokens > context:
        raise BadRequest(f"{len(prompt_ids)} prompt tokens + {max_new_tokens} new tokens exceed the model's "
                         f"context of {context} positions")
    vocab_size = getattr(config, "vocab_size", None)
    if vocab_size is not None and not all(0 <= t < vocab_size for t in prompt_ids):
        raise BadRequest(f"prompt token ids must lie in [0, {vocab_size})")
    eos = set() if eos_token_id is None else ({eos_token_id} if isinstance(eos_token_id, int) else set(eos_token_id))
    device = next(model.parameters()).device
    keep = max(2, 1 + len(eos)) * num_beams
    running: list[tuple[float, list[int]]] = [(0.0, list(prompt_ids))]
    finished: list[tuple[float, list[int]]] = []
    can_improve = True
    rows_forwarded = 0
    step = 0
    with torch.inference_mode():
        for step in range(max_new_tokens):
            batch = torch.tensor([seq for _, seq in running], device=device)
            rows_forwarded += batch.shape[0]
            logits = model(input_ids=batch, use_cache=False).logits[:, -1].float()
            log_probs = torch.log_softmax(logits, dim=-1)
            totals = log_probs + torch.tensor([s for s, _ in running], device=device)[:, None]
            vocab = totals.shape[-1]
            values, flat = torch.topk(totals.reshape(-1), min(keep, totals.numel()))
            last_step = step == max_new_tokens - 1
            generated = step + 1
            full = len(finished) == num_beams
            next_running: list[tuple[float, list[int]]] = []
            for rank, (value, index) in enumerate(zip(values.tolist(), flat.tolist())):
                beam, token = divmod(index, vocab)
                sequence = running[beam][1] + [token]
                if token in eos or last_step:
                    if rank < num_beams and can_improve and not (full and early_stopping is True):
                        finished.append((value / generated ** length_penalty, sequence))
                elif len(next_running) < num_beams:
                    next_running.append((value, sequence))
            finished = sorted(finished, key=lambda item: -item[0])[:num_beams]
            running = next_running
            if last_step or not running:
                break
            if len(finished) == num_beams:
                if early_stopping is True:
                    break
                length = max_new_tokens if (early_stopping == "never" and length_penalty > 0) else generated
                best_possible = running[0][0] / length ** length_penalty
                can_improve = can_improve and best_possible > finished[-1][0]
                if not can_improve:
                    break
    if not finished:  # only possible if the length limit was never reached and nothing ended
        finished = [(score / (step + 1) ** length_penalty, seq) for score, seq in running]
    return BeamResult(sequences=[seq[len(prompt_ids):] for _, seq in finished],
                      scores=[score for score, _ in finished], steps=step + 1, rows_forwarded=rows_forwarded)


def distinct_n(samples: Sequence[Sequence[int]], n: int) -> float:
    """Distinct-n: unique n-grams over all n-grams, pooled across samples; 1 means no n-gram repeats (Chapter 5)."""
    if n < 1:
        raise BadRequest(f"n must be at least 1, got {n}")
    grams = [tuple(s[i:i + n]) for s in samples for i in range(len(s) - n + 1)]
    if not grams:
        raise BadRequest(f"no sample is long enough for {n}-grams")
    return len(set(grams)) / len(grams)


def repetition_rate(sample: Sequence[int], n: int = 2) -> float:
    """Within one sample: the share of its n-grams that already occurred earlier in it (Chapter 5)."""
    if n < 1:
        raise BadRequest(f"n must be at least 1, got {n}")
    grams = [tuple(sample[i:i + n]) for i in range(len(sample) - n + 1)]
    if not grams:
        raise BadRequest(f"the sample has fewer than {n} tokens")
    return 1.0 - len(set(grams)) / len(grams)
