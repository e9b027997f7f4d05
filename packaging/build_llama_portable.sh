#!/usr/bin/env bash
# Builds llama-cpp-python 0.3.36 without -march=native (GGML_NATIVE=OFF: the AVX2/FMA/F16C
# baseline llama.cpp offers for portable x86-64 builds) into the packaging virtualenv.
# --no-cache-dir keeps this wheel out of pip's cache, where it would replace the fast native
# wheel `make install` relies on (pip's cache does not key on CMAKE_ARGS).
set -euo pipefail
VENV="${1:?usage: build_llama_portable.sh VENV}"
if "$VENV/bin/python" -c "import llama_cpp, pathlib, sys; sys.exit(0 if (pathlib.Path(llama_cpp.__file__).parent / '.portable').exists() else 1)" 2>/dev/null; then
  exit 0
fi
CMAKE_ARGS="-DGGML_NATIVE=OFF" "$VENV/bin/python" -m pip install --no-cache-dir \
  --force-reinstall --no-deps --progress-bar off "llama-cpp-python==0.3.36"
touch "$("$VENV/bin/python" -c "import llama_cpp, pathlib; print(pathlib.Path(llama_cpp.__file__).parent)")/.portable"
