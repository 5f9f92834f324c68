"""JSON Schema → Lark grammar text; the implementation lives in :mod:`glrmask.json_schema`."""
from __future__ import annotations

from ..json_schema import json_schema_to_grammar, lower_json_schema

__all__ = ['json_schema_to_grammar', 'lower_json_schema']
