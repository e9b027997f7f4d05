"""The machine's Vulkan devices as the Vulkan loader lists them, without llama.cpp.

ggml lists only the devices it will use: by default dedicated and integrated GPUs, so a
software device (Mesa's lavapipe, "llvmpipe") or a CPU-type one is invisible to it unless
GGML_VK_VISIBLE_DEVICES names its index. The launcher wants every device the user could pick
(KoboldCpp's GPU ID list), with the index that GGML_VK_VISIBLE_DEVICES and `--usevulkan`
take, so the loader is asked directly: vkCreateInstance, vkEnumeratePhysicalDevices and
vkGetPhysicalDeviceProperties (Vulkan 1.0 core, stable ABI).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from dataclasses import dataclass
from typing import Any

_VK_SUCCESS = 0
_VK_INCOMPLETE = 5
_VK_STRUCTURE_TYPE_APPLICATION_INFO = 0
_VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO = 1
_VK_API_VERSION_1_0 = 1 << 22
# VkPhysicalDeviceProperties: apiVersion, driverVersion, vendorID, deviceID, deviceType (all
# 32-bit) and then deviceName[256]; the rest (limits, sparse properties) is not read, but the
# buffer must hold the whole struct (824 bytes on 64-bit platforms).
_PROPERTIES_BYTES = 4096
_DEVICE_TYPE_OFFSET = 16
_DEVICE_NAME_OFFSET = 20
_DEVICE_NAME_BYTES = 256
# VkPhysicalDeviceType
DEVICE_KINDS = {0: "other", 1: "integrated GPU", 2: "discrete GPU", 3: "virtual GPU", 4: "CPU"}


@dataclass(frozen=True)
class VulkanDevice:
    index: int  # the loader's order: what GGML_VK_VISIBLE_DEVICES and --usevulkan count
    name: str
    kind: str  # one of DEVICE_KINDS' values

    @property
    def is_gpu(self) -> bool:
        """ggml's default choice: dedicated and integrated GPUs only."""
        return self.kind in ("discrete GPU", "integrated GPU")


class _ApplicationInfo(ctypes.Structure):
    _fields_ = [
        ("sType", ctypes.c_int),
        ("pNext", ctypes.c_void_p),
        ("pApplicationName", ctypes.c_char_p),
        ("applicationVersion", ctypes.c_uint32),
        ("pEngineName", ctypes.c_char_p),
        ("engineVersion", ctypes.c_uint32),
        ("apiVersion", ctypes.c_uint32),
    ]


class _InstanceCreateInfo(ctypes.Structure):
    _fields_ = [
        ("sType", ctypes.c_int),
        ("pNext", ctypes.c_void_p),
        ("flags", ctypes.c_uint32),
        ("pApplicationInfo", ctypes.POINTER(_ApplicationInfo)),
        ("enabledLayerCount", ctypes.c_uint32),
        ("ppEnabledLayerNames", ctypes.c_void_p),
        ("enabledExtensionCount", ctypes.c_uint32),
        ("ppEnabledExtensionNames", ctypes.c_void_p),
    ]


def _loader() -> Any | None:
    names = {"win32": ["vulkan-1.dll"], "darwin": ["libvulkan.1.dylib", "libMoltenVK.dylib"]}
    candidates = names.get(sys.platform, ["libvulkan.so.1", "libvulkan.so"])
    found = ctypes.util.find_library("vulkan")
    for name in [*candidates, *([found] if found else [])]:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def vulkan_devices() -> list[VulkanDevice]:
    """Every Vulkan device the loader reports; empty without a loader or a driver."""
    vulkan = _loader()
    if vulkan is None:
        return []
    create, destroy = vulkan.vkCreateInstance, vulkan.vkDestroyInstance
    create.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    create.restype = ctypes.c_int
    destroy.argtypes, destroy.restype = [ctypes.c_void_p, ctypes.c_void_p], None
    enumerate_devices = vulkan.vkEnumeratePhysicalDevices
    enumerate_devices.argtypes = [
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_uint32),
        ctypes.c_void_p,
    ]
    enumerate_devices.restype = ctypes.c_int
    properties = vulkan.vkGetPhysicalDeviceProperties
    properties.argtypes, properties.restype = [ctypes.c_void_p, ctypes.c_void_p], None

    app = _ApplicationInfo(
        sType=_VK_STRUCTURE_TYPE_APPLICATION_INFO,
        pApplicationName=b"hearth",
        pEngineName=b"hearth",
        apiVersion=_VK_API_VERSION_1_0,
    )
    info = _InstanceCreateInfo(
        sType=_VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, pApplicationInfo=ctypes.pointer(app)
    )
    instance = ctypes.c_void_p()
    if create(ctypes.byref(info), None, ctypes.byref(instance)) != _VK_SUCCESS:
        return []  # no driver (VK_ERROR_INCOMPATIBLE_DRIVER) or none usable
    try:
        count = ctypes.c_uint32(0)
        if enumerate_devices(instance, ctypes.byref(count), None) != _VK_SUCCESS:
            return []
        handles = (ctypes.c_void_p * count.value)()
        if enumerate_devices(instance, ctypes.byref(count), handles) not in (
            _VK_SUCCESS,
            _VK_INCOMPLETE,
        ):
            return []
        devices = []
        buffer = ctypes.create_string_buffer(_PROPERTIES_BYTES)
        for index in range(count.value):
            properties(handles[index], buffer)
            raw = buffer.raw
            kind = int.from_bytes(raw[_DEVICE_TYPE_OFFSET : _DEVICE_TYPE_OFFSET + 4], "little")
            name = raw[_DEVICE_NAME_OFFSET : _DEVICE_NAME_OFFSET + _DEVICE_NAME_BYTES]
            devices.append(
                VulkanDevice(
                    index=index,
                    name=name.split(b"\0", 1)[0].decode("utf-8", errors="replace"),
                    kind=DEVICE_KINDS.get(kind, "other"),
                )
            )
        return devices
    finally:
        destroy(instance, None)
