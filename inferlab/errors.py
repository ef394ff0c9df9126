"""Errors that the lab raises on bad input or a missing model (Chapter 1).

Every error carries a message that says what was wrong and what to do about it; the command
line prints that message and exits with status 2.
"""
from __future__ import annotations


class InferlabError(Exception):
    """Base class of every error the lab raises on purpose (Chapter 1)."""


class BadRequest(InferlabError, ValueError):
    """A request that cannot be served as given: empty prompt, bad length, too long (Chapter 1)."""


class ModelUnavailable(InferlabError, RuntimeError):
    """A model that is unknown, or known but not loadable on this machine (Chapter 1)."""
