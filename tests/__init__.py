"""kvviz's tests (tests/conftest.py: fixtures and markers; docs/testing.md: what runs where).

Python's compiled files are written even where the environment says not to
(``PYTHONDONTWRITEBYTECODE``, set on some machines of this kind): without them every test process,
the test server and every command a test starts compiled kvviz and re-wrote the tests' asserts again
(≈ 6 s of processor time each on 2 cores, the larger part of a worker's collection). This package is
imported before conftest.py and the test modules, so their compiled files and kvviz's are kept in
``__pycache__`` (ignored by git); the processes the tests start read them.
"""
import sys

sys.dont_write_bytecode = False
