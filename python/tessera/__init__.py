"""tessera: tuned GEMM, GELU, conv2d and attention on any OpenCL device, from Python.

    import numpy as np, tessera
    print(tessera.devices())
    c = tessera.matmul(np.random.rand(256, 128).astype(np.float32), np.random.rand(128, 64).astype(np.float32))

Ops take NumPy arrays (copied to the device and back), tessera.Arrays (kept on the device) and
pyopencl arrays (used in place). Failures raise tessera.TesseraError (status and message);
bad arguments raise tessera.InvalidArgument, which is also a ValueError.
"""
from ._array import Array, empty, from_buffer, to_device
from ._device import Device, DeviceInfo, as_device, default_device, devices, set_default_device
from ._errors import InvalidArgument, TesseraError
from ._group import DeviceGroup
from ._gemm import gemm, matmul
from ._ops import adaptive_avg_pool2d, attention, avg_pool2d, conv2d, embedding, gelu, layernorm, max_pool2d
from ._profiling import profile
from ._tools import bench, cli, cli_path, report, tune


def version():
    """The C library's version."""
    return '0.1.0'


__version__ = version()
__all__ = ['Array', 'Device', 'DeviceGroup', 'DeviceInfo', 'InvalidArgument', 'TesseraError', 'adaptive_avg_pool2d', 'as_device',
           'attention', 'avg_pool2d', 'bench', 'cli',
           'cli_path', 'conv2d', 'default_device', 'devices', 'embedding', 'empty', 'from_buffer', 'gelu', 'profile', 'gemm', 'layernorm', 'matmul', 'max_pool2d', 'report',
           'set_default_device', 'to_device', 'tune', 'version']
