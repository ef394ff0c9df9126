"""Text: token counts, byte-level BPE, chat templates on ids (Chapters 1 and 3)."""
