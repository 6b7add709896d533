"""Kernel sources to cubins with NVRTC (no GPU needed), cached on disk."""
