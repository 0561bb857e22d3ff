"""The one implicit-GEMM dgrad kernel source (``dgrad.cu``, CUDA and HIP), the naive GPU
reference (``naive_ref.cu``) and the emitter that specialises them per spec."""

from .emit import KernelSource, emit, emit_reference

__all__ = ["KernelSource", "emit", "emit_reference"]
