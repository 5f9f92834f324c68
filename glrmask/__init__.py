"""glrmask: exact next-token masks for grammar-constrained decoding.

    vocab = glrmask.Vocab.default()                 # or Vocab.from_tokenizer_json(path)
    mask = glrmask.compile("grammars/json.lark", vocab)
    state = mask.start()
    bits = mask.get_mask(state)                     # packed int32, bit id%32 of word id//32
    state.commit(token_id)
    mask.save("json.glrm"); mask = glrmask.load("json.glrm", vocab)   # compiled once, loaded in ms
"""
from . import guards
from .api import Mask, State, commit_many, compile, compile_grammar, compile_json_schema, fill_masks, load
from .errors import (
    ArtifactError,
    GlrmaskError,
    GrammarError,
    GrammarTooComplex,
    RegexError,
    UnsupportedSchema,
    VocabError,
)
from .grammar.loader import load_grammar
from .json_schema import json_schema_to_grammar, lower_json_schema, lower_json_schema_ir
from .kernels import BitmaskError, allocate_token_bitmask, apply_token_bitmask_
from .vocab import Vocab

__version__ = "0.2.0"

__all__ = [
    "ArtifactError",
    "BitmaskError",
    "GlrmaskError",
    "GrammarError",
    "GrammarTooComplex",
    "Mask",
    "RegexError",
    "State",
    "UnsupportedSchema",
    "Vocab",
    "__version__",
    "allocate_token_bitmask",
    "apply_token_bitmask_",
    "commit_many",
    "compile",
    "compile_grammar",
    "compile_json_schema",
    "fill_masks",
    "guards",
    "json_schema_to_grammar",
    "load",
    "load_grammar",
    "lower_json_schema",
    "lower_json_schema_ir",
]
