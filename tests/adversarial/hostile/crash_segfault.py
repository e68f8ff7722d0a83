"""Hostile (crash): dereferences a null pointer through ctypes (SIGSEGV in the worker)."""
import ctypes


def run(x, y):
    ctypes.string_at(0)
    return x + y
