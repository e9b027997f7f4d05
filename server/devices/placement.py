"""Where the model runs: the backend, the devices and how many layers each side holds."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Placement:
    backend: str  # "CPU", "Vulkan", "CUDA": where the offloaded layers run
    devices: tuple[str, ...]  # the devices holding layers: "Vulkan0 (llvmpipe …, 1.9 GiB free)"
    gpu_layers: int  # llama.cpp's count of offloaded layers (the output layer counts as one)
    total_layers: int  # the model's repeating layers + the output layer
    reason: str  # how the count was chosen, or why nothing is offloaded

    @property
    def device(self) -> str:
        """One line for /api/extra/version and the launcher's running view."""
        return ", ".join(self.devices) if self.devices else "CPU"

    def describe(self) -> str:
        if not self.gpu_layers:
            return f"CPU ({self.reason})"
        share = (
            "every layer"
            if self.gpu_layers >= self.total_layers
            else f"{self.gpu_layers} of {self.total_layers} layers"
        )
        return f"{self.backend}: {share} on {self.device} ({self.reason})"


CPU_ONLY = Placement("CPU", (), 0, 0, "no GPU")
