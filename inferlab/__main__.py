"""``python -m inferlab``: see :mod:`inferlab.cli` (Chapter 1)."""
import sys

from inferlab.cli import main

sys.exit(main())
