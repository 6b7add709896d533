"""Plain records: what flows from a kernel file to a verdict, and what crosses the worker boundary.

Nothing here touches a GPU, imports pytest or judges anything; every record converts to and from
JSON-ready data (:mod:`.plain`), which is the only form in which it crosses a process boundary.
"""
