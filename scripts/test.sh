#!/usr/bin/env bash
# The whole test suite: unit tests of inferlab, notebook/text pairs in sync, every notebook
# re-executed against its published outputs (nbval), the book built with warnings as errors,
# the built pages rendered in headless Chromium with no network, and then the unit tests' fast
# lane under the oldest supported transformers (scripts/test_oldest.sh). When both lanes pass,
# scripts/suite_run.py keeps a record of the run (processor, versions, counts) in .venv/suite-run.json.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
bash scripts/build_book.sh
VENV=${INFERLAB_VENV:-.venv}
export TQDM_DISABLE=1 INFERLAB_BROWSER_TESTS=required
"$VENV/bin/python" -m pytest tests notebooks --nbval --nbval-current-env \
  --nbval-sanitize-with notebooks/nbval_sanitize.cfg -p no:cacheprovider --junitxml="$VENV/suite-main.xml" "$@"
# The fast lane again under the oldest supported transformers, on the lab installed from a wheel.
bash scripts/test_oldest.sh --junitxml="$(cd "$VENV" && pwd)/suite-oldest.xml"
"$VENV/bin/python" scripts/suite_run.py write "$(( $(date +%s) - start ))" "$VENV/suite-main.xml" \
  "$VENV/suite-oldest.xml" "$@"
