"""Book-only helpers: exercise checkers and figures. Notebooks import this; the runtime never does."""
