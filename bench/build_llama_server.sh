#!/usr/bin/env bash
# Builds llama.cpp's own llama-server from the llama.cpp sources vendored in the
# llama-cpp-python 0.3.36 sdist (the same llama.cpp Hearth runs), into a cache folder.
# First run: ~15 minutes on 2 cores; later runs reuse the binary.
set -euo pipefail
CACHE="${HEARTH_BENCH_CACHE:-$HOME/.cache/hearth-bench}"
BIN="$CACHE/llama-server"
if [ -x "$BIN" ]; then echo "$BIN"; exit 0; fi
mkdir -p "$CACHE"
cd "$CACHE"
if [ ! -d src ]; then
  python3 -m pip download --quiet --no-deps --no-binary :all: -d sdist "llama-cpp-python==0.3.36" >&2
  mkdir -p src && tar -xzf sdist/llama_cpp_python-0.3.36.tar.gz -C src --strip-components=1
fi
cmake -S src/vendor/llama.cpp -B build -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF >&2
cmake --build build --target llama-server -j "$(nproc)" >&2
cp build/bin/llama-server "$BIN"
echo "$BIN"
