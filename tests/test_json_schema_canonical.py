"""The lowering's canonical text of a schema value is exactly ``json.dumps(v, sort_keys=True,
separators=(',', ':'), default=repr)``, with or without the per-lowering memo, so memoizing it
changes no rule the lowering shares between equal schemas."""
from __future__ import annotations

import enum
import json
import math
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from glrmask.json_schema.canonical import canonical_text, memoized_texts


def _reference(v) -> str:
    return json.dumps(v, sort_keys=True, separators=(',', ':'), default=repr)


class _Color(enum.IntEnum):
    RED = 1


class _Text(str):
    pass


_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
    st.text(), st.sampled_from([Decimal("1.50"), Fraction(1, 3), _Color.RED, _Text("é\u2028"), -0.0, 1e300]),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=5), inner, max_size=4),
        st.dictionaries(st.integers(-3, 3), inner, max_size=3),  # keys json converts to text
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(_VALUES)
def test_canonical_text_is_json_dumps_with_sorted_keys(v):
    assert canonical_text(v) == _reference(v)
    with memoized_texts():
        assert canonical_text(v) == _reference(v)
        assert canonical_text(v) == _reference(v)  # the second time from the memo


def test_shared_parts_are_written_in_full_wherever_they_occur():
    part = {"type": "string", "enum": ["b", "a", math.inf]}
    v = {"z": part, "a": [part, (part, None)], "m": {"n": part}}
    with memoized_texts():
        assert canonical_text(part) == _reference(part)
        assert canonical_text(v) == _reference(v)


def test_a_cycle_is_the_same_value_error():
    v: list = [1]
    v.append({"x": v})
    with pytest.raises(ValueError, match="Circular reference detected"):
        _reference(v)
    with memoized_texts(), pytest.raises(ValueError, match="Circular reference detected"):
        canonical_text(v)


def test_keys_json_cannot_write_are_the_same_type_error():
    with pytest.raises(TypeError):
        _reference({(1, 2): 0})
    with memoized_texts(), pytest.raises(TypeError):
        canonical_text({(1, 2): 0})


def test_the_memo_ends_with_its_block():
    v = {"a": [1]}
    with memoized_texts():
        canonical_text(v)
    v["a"].append(2)  # outside any lowering, values may change: nothing is remembered
    assert canonical_text(v) == _reference(v)
