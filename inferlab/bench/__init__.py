"""Benchmarking: repeated requests and their stage summaries (Chapter 1; Part II fills it)."""
from inferlab.bench.stages import StageSummary, format_summary, run_repeated, summarise_timings

__all__ = ["StageSummary", "format_summary", "run_repeated", "summarise_timings"]
