"""Analysis: sizing, FLOPs and memory of a model shape (Chapters 2 and 4).

Both read one :class:`inferlab.models.shape.ModelShape`: :mod:`inferlab.analysis.sizing` counts
parameters, memory and FLOPs per token from it (Chapter 2), and :mod:`inferlab.analysis.flops`
costs each operation of a forward pass (Chapter 4); sizing's FLOPs are that cost model's sums.
"""
