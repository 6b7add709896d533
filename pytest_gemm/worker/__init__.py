"""The GPU worker: everything that touches the GPU, in a process of its own.

The only package that imports CuPy or NVML. It runs as ``python -m pytest_gemm.worker``, started
and replaced by :mod:`pytest_gemm.isolation`; requests come in and outcomes go out as plain data.
"""
