"""Test support shipped to users: fakes and contract suites (may import pytest).

Nothing in the library imports this package.
"""
