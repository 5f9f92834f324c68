"""Cython runtime of glrmask: the hot loops (bitsets, lexer scans, mask walks, Aho–Corasick)."""
