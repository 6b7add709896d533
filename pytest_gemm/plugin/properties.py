"""The user properties pytest-gemm puts on test reports (they travel from xdist workers as plain data)."""

CASE = "gemm_case"  # every case item: which file, kernel and case it is
WHOLE_FILE = "gemm_file_whole"  # every case item: whether its whole kernel file is selected (by -k, -m, ids)
SOURCE = "gemm_source"  # every case item run: its kernel file and that file's SHA-256 as collected (for saved runs)
DECLARED = "gemm_declared"  # a case item whose kernel's header declares what changes its checks: those lines
NO_DEVICE = "gemm_no_device"  # a case skipped because there is no CUDA device: the reason
RECORD = "gemm_timing"  # a timed case: its CaseRecord, as a dict
GPU = "gemm_gpu"  # a case run on a GPU: the worker's device facts
#: a case run in a worker: its process id, why it was replaced after the case, what it compiled, the seconds
#: of each phase in the worker, and the wall time the pytest process waited for it (the difference is the
#: cost of isolation: starting workers, passing requests and outcomes)
WORKER = "gemm_worker"
MARGIN = "gemm_margin"  # a verified case: how far inside the verification bounds its output was
COMPILE = "gemm_compile"  # a compile item: its CompileRecord, as a dict
ERROR_MAP = "gemm_error_map"  # a failed verification with an error map: its FailedCase, as a dict
