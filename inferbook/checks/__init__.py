"""Exercise checkers, one module per chapter."""
