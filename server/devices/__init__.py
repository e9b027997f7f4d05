"""GPU devices without llama.cpp: which backends this build has (`backends`), the Vulkan
loader's devices (`vulkan`), the device list the launcher shows (`listing`), where a model's
layers go (`placement`) and RPC worker addresses (`rpc_endpoints`).

May import: `server.base`. Never llama_cpp: the parts that ask ggml itself live in
`server/core/llama/` (the one package that owns llama_cpp).
"""
