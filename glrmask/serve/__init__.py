"""Serving glrmask on one machine: a decode engine over a transformers causal LM, its batched
sampler and incremental detokenizer, an OpenAI-compatible HTTP server and ``glrmask generate``.

Grammar masks, phrase bans (with rewind) and no-repeat-ngram bans are applied together on every
step. The HTTP server needs the optional ``serve`` extra (``pip install 'glrmask[serve]'``); the
modules here import it only where it is used.
"""
