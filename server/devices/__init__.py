"""GPU devices without llama.cpp: which backends this build has (`backends`), the Vulkan
loader's devices (`vulkan`), the device list `hearth list-devices` prints (`listing`), the
record of where a model's layers went (`placement`) and RPC worker addresses (`rpc_endpoints`).

May import: `server.base` and the standard library (the Vulkan loader through ctypes). Never
llama_cpp: the parts that ask ggml itself live in `server/core/llama/` (the one package that
owns llama_cpp), and the launcher imports this layer.
"""
