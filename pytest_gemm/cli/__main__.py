"""``python -m pytest_gemm.cli``: the ``pytest-gemm`` command."""

import sys

from . import main

sys.exit(main())
