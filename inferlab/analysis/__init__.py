"""Analysis: sizing, FLOPs and memory of a model shape (Chapters 2 and 4)."""
