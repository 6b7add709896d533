"""Saved runs: their records in memory (``data``), their JSON format, written and read checked (``saved``, ``check``,
``legacy`` for older files), and merging runs into one (``merge``, ``plan``). Pure: no pytest, no GPU, no drawing.
"""
