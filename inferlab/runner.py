"""A real model behind the Chapter 1 interface: greedy decoding with no cache (Chapter 1).

Every step runs the model over the whole sequence so far and keeps only the last position's
logits. That is wasteful on purpose: it is the baseline that the KV cache (Chapter 9) improves on,
and it has to be measured before it is improved.
"""
from __future__ import annotations

from typing import Any

from inferlab.records import GenerationResult
from inferlab.models.registry import LoadedModel
from inferlab.request import check_context, parse_request
from inferlab.timing import StageClock


class RealModelRunner:
    """Runs a loaded Hugging Face causal LM through the seven stages of a request (Chapter 1)."""

    simulated_stages: list[str] = []

    def __init__(self, loaded: LoadedModel, threads: int | None = None):
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        self.loaded = loaded
        self.threads = threads

    def _forward_last(self, ids: Any) -> Any:
        import torch

        with torch.inference_mode():
            return self.loaded.model(input_ids=ids, use_cache=False).logits[0, -1]

    def generate(self, prompt: str, max_new_tokens: int) -> GenerationResult:
        """Greedy generation of up to ``max_new_tokens`` tokens, every stage timed (Chapter 1)."""
        import torch

        tokenizer = self.loaded.tokenizer
        device = self.loaded.device
        previous_threads = torch.get_num_threads()
        if self.threads is not None:
            torch.set_num_threads(self.threads)
        try:
            clock = StageClock(device)
            with clock.stage("request_parse"):
                request = parse_request(prompt, max_new_tokens)
            with clock.stage("tokenize"):
                pieces = tokenizer.tokenize(request.prompt)
            with clock.stage("encode"):
                prompt_ids = tokenizer.convert_tokens_to_ids(pieces)
                check_context(len(prompt_ids), request.max_new_tokens, self.loaded.context)
                ids = torch.tensor([prompt_ids], device=device)
            new_ids: list[int] = []
            for step in range(request.max_new_tokens):
                with clock.stage("forward_pass", step):
                    logits = self._forward_last(ids)
                with clock.stage("sample", step):
                    next_id = int(torch.argmax(logits))  # first maximum: ties go to the smallest id
                ids = torch.cat([ids, ids.new_tensor([[next_id]])], dim=1)
                new_ids.append(next_id)
            with clock.stage("decode"):
                tokens = tokenizer.convert_ids_to_tokens(new_ids)
                text = tokenizer.decode(new_ids)
            with clock.stage("response_format"):
                provenance = self.loaded.provenance.with_run(device, torch.get_num_threads())
                metadata = {
                    "generator": "real",
                    "decoding": "greedy",
                    "kv_cache": False,
                    "provenance": provenance.to_dict(),
                }
        finally:
            torch.set_num_threads(previous_threads)
        return GenerationResult(
            prompt=request.prompt,
            prompt_ids=list(prompt_ids),
            token_ids=new_ids,
            tokens=tokens,
            text=text,
            timings=clock.timings,
            simulated_stages=list(self.simulated_stages),
            metadata=metadata,
        )
