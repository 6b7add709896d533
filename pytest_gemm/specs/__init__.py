"""Kernel files to specs to cases: header parsing, safe expressions, expansion, launch geometry and limits."""
