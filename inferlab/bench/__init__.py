"""Benchmarking: repeated requests and their summaries (Chapter 1; Part II fills it)."""
