"""The CUDA driver API through ctypes, for `symmpin doctor`: only libcuda.so.1 (the driver's own
library), so it works where there is no CUDA toolkit and no CUDA runtime. Nothing here makes a
context or allocates memory: cuInit, then attribute and peer queries.

The attribute numbers are CUdevice_attribute's (cuda.h, CUDA 13.0).
"""

import ctypes

ATTR_CC_MAJOR = 75  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
ATTR_CC_MINOR = 76  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
ATTR_VMM = 102  # CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
ATTR_POSIX_FD = 103  # CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
ATTR_MULTICAST = 132  # CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED (information only)

# The driver functions symmem/pool.c looks up for the pools (cudaGetDriverEntryPointByVersion):
# a driver that lacks one keeps every communicator on NCCL.
VMM_FUNCTIONS = ("cuMemCreate", "cuMemRelease", "cuMemAddressReserve", "cuMemAddressFree",
                 "cuMemMap", "cuMemUnmap", "cuMemSetAccess", "cuMemExportToShareableHandle",
                 "cuMemImportFromShareableHandle", "cuMemGetAllocationGranularity")


class DriverError(Exception):
    """A driver call that failed: the call and CUDA's name for the error."""


class Driver:
    """libcuda.so.1, loaded. Every method raises DriverError when the driver says no."""

    def __init__(self, lib):
        self._lib = lib

    @classmethod
    def load(cls, name="libcuda.so.1"):
        """The driver, or DriverError saying why it cannot be loaded (no NVIDIA driver here)."""
        try:
            return cls(ctypes.CDLL(name))
        except OSError as e:
            raise DriverError(f"{name} cannot be loaded: {e}") from None

    def _error_name(self, rc):
        s = ctypes.c_char_p()
        try:
            if self._lib.cuGetErrorName(rc, ctypes.byref(s)) == 0 and s.value:
                return s.value.decode()
        except AttributeError:
            pass
        return f"error {rc}"

    def _call(self, fn, *args):
        rc = getattr(self._lib, fn)(*args)
        if rc != 0:
            raise DriverError(f"{fn} failed: {self._error_name(rc)}")

    def init(self):
        self._call("cuInit", ctypes.c_uint(0))

    def version(self):
        """The CUDA version the driver supports, as CUDA writes it: 13000 = 13.0."""
        v = ctypes.c_int()
        self._call("cuDriverGetVersion", ctypes.byref(v))
        return v.value

    def device_count(self):
        n = ctypes.c_int()
        self._call("cuDeviceGetCount", ctypes.byref(n))
        return n.value

    def _device(self, ordinal):
        d = ctypes.c_int()
        self._call("cuDeviceGet", ctypes.byref(d), ctypes.c_int(ordinal))
        return d

    def name(self, ordinal):
        buf = ctypes.create_string_buffer(256)
        self._call("cuDeviceGetName", buf, ctypes.c_int(len(buf)), self._device(ordinal))
        return buf.value.decode(errors="replace")

    def attribute(self, attr, ordinal):
        v = ctypes.c_int()
        self._call("cuDeviceGetAttribute", ctypes.byref(v), ctypes.c_int(attr),
                   self._device(ordinal))
        return v.value

    def can_access_peer(self, a, b):
        v = ctypes.c_int()
        self._call("cuDeviceCanAccessPeer", ctypes.byref(v), self._device(a), self._device(b))
        return v.value != 0

    def has_function(self, fn):
        try:
            getattr(self._lib, fn)
            return True
        except AttributeError:
            return False
