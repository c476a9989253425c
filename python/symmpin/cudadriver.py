"""The CUDA driver API through ctypes, for `symmpin doctor`: only libcuda.so.1 (the driver's own
library), so it works where there is no CUDA toolkit and no CUDA runtime. Nothing here makes a
context or allocates memory: cuInit, then attribute and peer queries. Every function is taken the
way libsymmpin takes it (driver/cu.h): cuGetProcAddress_v2 at the CUDA 12.0 ABI, so the doctor
sees the driver as the library will.

The attribute numbers are CUdevice_attribute's (cuda.h, CUDA 13.0).
"""

import ctypes

ATTR_CC_MAJOR = 75  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
ATTR_CC_MINOR = 76  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
ATTR_VMM = 102  # CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
ATTR_POSIX_FD = 103  # CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
ATTR_MULTICAST = 132  # CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED (information only)

# The driver functions libsymmpin takes (driver/cu.h's SYMMPIN_CU_FUNCTIONS, in its order; the
# CPU test tests/python/test_cudadriver.py holds the two lists together), each asked for as CUDA
# 12.0 defined it (CU_ABI) through cuGetProcAddress_v2: a driver that does not give one keeps
# every communicator on NCCL.
CU_ABI = 12000
CU_FUNCTIONS = (
    "cuGetErrorName", "cuInit", "cuDeviceGet", "cuDeviceGetCount", "cuDeviceGetAttribute",
    "cuDeviceGetName", "cuDeviceGetUuid", "cuDeviceCanAccessPeer", "cuDevicePrimaryCtxRetain",
    "cuCtxGetCurrent", "cuCtxSetCurrent", "cuCtxGetDevice", "cuCtxGetId", "cuStreamGetCaptureInfo",
    "cuThreadExchangeStreamCaptureMode", "cuStreamCreate", "cuStreamDestroy", "cuStreamSynchronize",
    "cuStreamWaitEvent", "cuStreamQuery", "cuEventCreate", "cuEventDestroy", "cuEventRecord",
    "cuEventQuery", "cuEventSynchronize", "cuEventElapsedTime", "cuMemHostAlloc", "cuMemFreeHost",
    "cuMemHostGetDevicePointer", "cuMemsetD8Async", "cuUserObjectCreate", "cuUserObjectRelease",
    "cuGraphRetainUserObject", "cuLibraryLoadData", "cuLibraryGetKernel", "cuKernelGetFunction",
    "cuLaunchKernelEx", "cuMemCreate", "cuMemRelease", "cuMemAddressReserve", "cuMemAddressFree",
    "cuMemMap", "cuMemUnmap", "cuMemSetAccess", "cuMemExportToShareableHandle",
    "cuMemImportFromShareableHandle", "cuMemGetAllocationGranularity")
_LEGACY_STREAM = 1  # CU_GET_PROC_ADDRESS_LEGACY_STREAM


class DriverError(Exception):
    """A driver call that failed: the call and CUDA's name for the error."""


class Driver:
    """libcuda.so.1, loaded. Every method raises DriverError when the driver says no."""

    def __init__(self, lib):
        self._lib = lib
        self._fns = {}
        try:
            self._get = lib.cuGetProcAddress_v2
        except AttributeError:
            self._get = None

    @classmethod
    def load(cls, name="libcuda.so.1"):
        """The driver, or DriverError saying why it cannot be loaded (no NVIDIA driver here)."""
        try:
            return cls(ctypes.CDLL(name))
        except OSError as e:
            raise DriverError(f"{name} cannot be loaded: {e}") from None

    def has_get_proc_address(self):
        """Whether the driver has cuGetProcAddress_v2 (CUDA 12.0, r525, and newer)."""
        return self._get is not None

    def _function(self, fn):
        """`fn` as the driver gives it at CU_ABI, or None."""
        if fn in self._fns:
            return self._fns[fn]
        ptr = ctypes.c_void_p()
        status = ctypes.c_int(-1)
        found = None
        if self._get is not None:
            rc = self._get(fn.encode(), ctypes.byref(ptr), ctypes.c_int(CU_ABI),
                           ctypes.c_uint64(_LEGACY_STREAM), ctypes.byref(status))
            if rc == 0 and status.value == 0 and ptr.value:
                found = ctypes.CFUNCTYPE(ctypes.c_int)(ptr.value)
        self._fns[fn] = found
        return found

    def has_function(self, fn):
        return self._function(fn) is not None

    def _error_name(self, rc):
        s = ctypes.c_char_p()
        f = self._function("cuGetErrorName")
        if f is not None and f(ctypes.c_int(rc), ctypes.byref(s)) == 0 and s.value:
            return s.value.decode()
        return f"error {rc}"

    def _call(self, fn, *args):
        """Call `fn` (ctypes arguments, which the prototype passes on as they are)."""
        f = self._function(fn)
        if f is None:
            raise DriverError(f"the driver does not give {fn} at the CUDA 12.0 ABI"
                              + ("" if self._get else " (it has no cuGetProcAddress_v2)"))
        rc = f(*args)
        if rc != 0:
            raise DriverError(f"{fn} failed: {self._error_name(rc)}")

    def init(self):
        self._call("cuInit", ctypes.c_uint(0))

    def version(self):
        """The CUDA version the driver supports, as CUDA writes it: 13000 = 13.0 (found directly,
        as libsymmpin does: it says whether the rest can be asked at all)."""
        v = ctypes.c_int()
        try:
            rc = self._lib.cuDriverGetVersion(ctypes.byref(v))
        except AttributeError:
            raise DriverError("the driver has no cuDriverGetVersion") from None
        if rc != 0:
            raise DriverError(f"cuDriverGetVersion failed: error {rc}")
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
