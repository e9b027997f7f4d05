"""llama.cpp's `llama-server` native routes (its web UI, editors' "llama.cpp" providers)."""
