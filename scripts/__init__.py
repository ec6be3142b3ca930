"""Not a package: `scripts/` holds runnable scripts (run them by path, e.g. `.venv/bin/python scripts/invoke-INT8.py`).

The library they wrap is `sagebox`; nothing imports from `scripts`.
"""

raise ImportError("scripts/ is not a package: run its files by path; import `sagebox` instead")
