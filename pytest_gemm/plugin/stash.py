"""Where the session lives: one key in ``config.stash`` (items reach the session through it)."""

from __future__ import annotations

from typing import Any

import pytest

#: the run's GemmSession (see .session); typed loosely here so that items need not import the session
SESSION = pytest.StashKey[Any]()
