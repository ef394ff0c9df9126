#!/usr/bin/env bash
# Build the HTML book into _build/html, failing on any warning or broken reference.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
VENV=${INFERLAB_VENV:-.venv}
"$VENV/bin/jupyter-book" build . -W -n --keep-going
echo "book: open _build/html/index.html"
