"""Shared helpers for the JSON Schema tests: lark as the judge, jsonschema as the oracle."""
from __future__ import annotations

import json
from functools import lru_cache

import jsonschema
import lark

from glrmask.json_schema import json_schema_to_grammar


@lru_cache(maxsize=256)
def _parser(text: str) -> lark.Lark:
    return lark.Lark(text, parser="earley", lexer="dynamic", regex=False)


def parser_for(schema, **kw) -> lark.Lark:
    return _parser(json_schema_to_grammar(schema, **kw))


def accepts(parser: lark.Lark, text: str) -> bool:
    try:
        parser.parse(text)
        return True
    except lark.exceptions.LarkError:
        return False


def valid(schema, instance) -> bool:
    cls = jsonschema.Draft202012Validator
    return cls(schema, format_checker=cls.FORMAT_CHECKER).is_valid(instance)


def dumps(x, **kw) -> str:
    return json.dumps(x, **kw)
