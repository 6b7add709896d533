import os, sys, time, json
os.environ.setdefault("NVIDIA_TF32_OVERRIDE", "0")
import numpy as np, cupy as cp
print("py", sys.version, "numpy", np.__version__, "cupy", cp.__version__)
import cuda.bindings, importlib.metadata as md
for p in ["cuda-bindings","nvidia-cuda-nvrtc","nvidia-cuda-runtime","cuda-pathfinder","ml-dtypes","pytest","pytest-benchmark","nvidia-ml-py","setuptools","pytest-xdist"]:
    try: print(p, md.version(p))
    except Exception as e: print(p, "MISSING")
from cuda.bindings import nvrtc
print("nvrtc", nvrtc.nvrtcVersion())
import cuda.pathfinder as pf
try: print("cudart hdr", pf.find_nvidia_header_directory("cudart"))
except Exception as e: print("hdr err", e)
print("CUDA_PATH", os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"))
src = b'extern "C" __global__ void k(float* a, int n){ int i=blockIdx.x*blockDim.x+threadIdx.x; if(i<n) a[i]=2.f*i; }'
err, prog = nvrtc.nvrtcCreateProgram(src, b"k.cu", 0, [], [])
opts=[b"--gpu-architecture=sm_90"]
print(nvrtc.nvrtcCompileProgram(prog, 1, opts))
err, n = nvrtc.nvrtcGetCUBINSize(prog); cub = b" "*n; nvrtc.nvrtcGetCUBIN(prog, cub)
m = cp.cuda.function.Module(); m.load(cub); f = m.get_function("k")
print([a for a in dir(f) if not a.startswith("_")])
a = cp.zeros(100, cp.float32); f((1,), (128,), (a, np.int32(100))); cp.cuda.runtime.deviceSynchronize(); print(a[:4])
try:
    f.max_dynamic_shared_size_bytes = 100000; print("maxdyn ok", f.max_dynamic_shared_size_bytes)
except Exception as e: print("maxdyn err", e)
print("attrs", getattr(f, "num_regs", None))
import ml_dtypes
x = cp.asarray(np.random.rand(64,64).astype(ml_dtypes.bfloat16))
try: y = cp.matmul(x, x); print("bf16 matmul", y.dtype)
except Exception as e: print("bf16 matmul err", e)
print(cp.cuda.runtime.getDeviceProperties(0)["name"], cp.cuda.runtime.deviceGetPCIBusId(0))
print("cublas", cp.cuda.cublas.getVersion(cp.cuda.device.get_cublas_handle()))
A = cp.random.rand(4096,4096, dtype=cp.float32); s=cp.cuda.Event(); e=cp.cuda.Event()
for i in range(3): cp.matmul(A,A)
s.record(); [cp.matmul(A,A) for _ in range(10)]; e.record(); e.synchronize()
print("fp32 TFLOPs", 10*2*4096**3/(cp.cuda.get_elapsed_time(s,e)/1e3)/1e12)
import pynvml; pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByPciBusId(cp.cuda.runtime.deviceGetPCIBusId(0)); print(pynvml.nvmlDeviceGetName(h))
