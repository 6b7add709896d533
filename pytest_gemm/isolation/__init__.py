"""The pytest process's side of the worker boundary: start a GPU worker, feed it requests, limit their
time, and replace it when it crashes, hangs or dies. Nothing here touches CUDA.
"""
