#!/usr/bin/env bash
# Build the HTML book into _build/html, failing on any warning or broken reference.
set -euo pipefail
cd "$(dirname "$0")/.."
export INFERLAB_LLAMA_BACKGROUND=1  # setup.sh may compile llama-cpp-python while the book builds
bash scripts/setup.sh
VENV=${INFERLAB_VENV:-.venv}
"$VENV/bin/jupyter-book" build . -W -n --keep-going
pidfile="$VENV/llama-cpp-build.pid"
if [ -f "$pidfile" ]; then  # setup.sh's background build of llama-cpp-python: wait for it, then check it
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then echo "book: waiting for setup's llama-cpp-python build"; fi
  while kill -0 "$pid" 2>/dev/null; do sleep 5; done
  rm -f "$pidfile"
  if [ "$(cat "$VENV/llama-cpp-build.result" 2>/dev/null)" != ok ]; then
    echo "book: building llama-cpp-python failed:"; cat "$VENV/llama-cpp-build.log"; exit 1
  fi
fi
echo "book: open _build/html/index.html"
