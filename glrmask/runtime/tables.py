"""The arrays the native runtime reads, assembled from a compile or an artifact, and checked.

Why a separate step. The native walk (``glrmask_ext.runtime``) indexes its tables without bounds
checks — that is what makes it fast — so every array it is handed must be proven in range first.
Compiled tables are right by construction; an artifact is untrusted input (a recomputed checksum
proves nothing), so :func:`runtime_arrays_from_stored` validates every id, offset, shape and
dtype with vectorized numpy checks and raises :class:`~glrmask.errors.ArtifactError` otherwise.

Three groups of arrays:

* *stored* (what :meth:`glrmask.Mask.save` writes besides the lexer and LR table): the complete
  Parser DWA in its flat layout (:meth:`glrmask.compiler.parser_dwa.ParserDWA.arrays`), the
  condition failure seeds as class bitsets, and ``class_of_orig`` (the class of every original
  token id, ``-1`` for none) — :func:`stored_arrays`;
* *lexer/parser* arrays read from the validated :class:`~glrmask.lexer.dense.DenseLexer` and
  :class:`~glrmask.lr.table.LRTable`;
* *expansion and token* arrays derived at load time (class → original ids, dense rows for big
  classes, token bytes and kinds from the :class:`~glrmask.vocab.Vocab`).
"""
from __future__ import annotations

import threading

from typing import Mapping, Sequence

import numpy as np

from glrmask.errors import ArtifactError

__all__ = ["STORED_KEYS", "stored_arrays", "runtime_arrays_from_stored", "dynamic_arrays", "build_tables"]

STORED_KEYS = ("boundary_states", "start_accept", "start_class", "start_ptr", "start_class_of", "start_target",
               "edge_ptr", "edge_label", "edge_target", "edge_accept", "default_target", "default_accept",
               "root_restrict", "weights", "cond_ids", "cond_weight", "class_of_orig", "n_classes")

_DENSE_MIN_TOKENS = 256
"""A class with at least this many tokens expands as one dense row (a word-wise OR) instead of a
scatter of its ids; the row costs ``n_words / 8`` in the expansion cost model."""


def stored_arrays(pdwa, classes, trie, vocab_size: int) -> dict[str, np.ndarray]:
    """What an artifact stores for the runtime, from a compiled Parser DWA (complete: this runs
    its full determinization), the token classes and the vocabulary trie."""
    a = pdwa.arrays()
    n_words = a["weights"].shape[1]
    tdwa = pdwa.tdwa
    conds = np.asarray(tdwa.cond_ids, dtype=np.int32)
    cond_weight = np.full(len(conds), -1, dtype=np.int32)
    fail_rows = []
    for i, w in enumerate(np.asarray(tdwa.fail_seed).tolist()):
        if w >= 0:
            cond_weight[i] = a["weights"].shape[0] + len(fail_rows)
            bits = pdwa.class_sets[w]
            fail_rows.append(np.frombuffer(bits.to_bytes(n_words * 8, "little"), dtype="<u8"))
    weights = a["weights"]
    if fail_rows:
        weights = np.concatenate([weights, np.stack(fail_rows).astype(np.uint64)])
    internal_class = classes.class_of_tokens()
    o2i = np.asarray(trie.orig_to_internal, dtype=np.int64)[:vocab_size]
    class_of_orig = np.where(o2i >= 0, internal_class[np.maximum(o2i, 0)], -1).astype(np.int32)
    out = {k: np.ascontiguousarray(a[k], dtype=np.int32) for k in STORED_KEYS[:13]}
    out["weights"] = np.ascontiguousarray(weights, dtype=np.uint64)
    out["cond_ids"] = conds
    out["cond_weight"] = cond_weight
    out["class_of_orig"] = class_of_orig
    out["n_classes"] = np.asarray([classes.n_classes], dtype=np.int64)
    return out


def _want(a: Mapping[str, np.ndarray], name: str, dtype, ndim: int) -> np.ndarray:
    if name not in a:
        raise ArtifactError(f"runtime array {name!r} missing")
    x = np.asarray(a[name])
    if x.dtype != np.dtype(dtype) or x.ndim != ndim:
        raise ArtifactError(f"runtime array {name!r}: expected {ndim}-d {np.dtype(dtype)}, got {x.ndim}-d {x.dtype}")
    return x


def _in_range(x: np.ndarray, lo: int, hi: int, name: str) -> None:
    """Every value in ``[lo, hi)``."""
    if x.size and (int(x.min()) < lo or int(x.max()) >= hi):
        raise ArtifactError(f"runtime array {name!r}: value outside [{lo}, {hi})")


def _csr(ptr: np.ndarray, n_rows: int, n_items: int, name: str) -> None:
    if ptr.shape != (n_rows + 1,) or (ptr.size and (int(ptr[0]) != 0 or int(ptr[-1]) != n_items)):
        raise ArtifactError(f"runtime array {name!r}: not a CSR pointer over {n_items} items")
    if n_rows and bool((np.diff(ptr.astype(np.int64)) < 0).any()):
        raise ArtifactError(f"runtime array {name!r}: pointers decrease")


def runtime_arrays_from_stored(stored: Mapping[str, np.ndarray], lexer, table, ignore: Sequence[str],
                               vocab, eos_ids: Sequence[int]) -> dict[str, np.ndarray]:
    """Validate the stored arrays against the lexer, the LR table and the vocabulary and assemble
    the native runtime's input (see :class:`glrmask_ext.runtime.Tables`)."""
    dfa = lexer.dfa
    lex_n = int(dfa.n_states)
    lex_trans = np.ascontiguousarray(dfa.trans, dtype=np.int32)
    n_conds = int(dfa.cond_trans.shape[0])
    names = lexer.terminal_names
    lr_of_lex, lex_ignored = _terminal_maps(names, table, ignore)
    futures = np.ascontiguousarray(dfa.futures, dtype=np.uint64)
    if futures.ndim != 2 or futures.shape[0] != lex_n or futures.shape[1] * 64 < len(names):
        raise ArtifactError("runtime: lexer futures do not cover every terminal")
    if len(names) % 64 and futures.shape[1] and bool((futures[:, -1] >> np.uint64(len(names) % 64)).any()):
        raise ArtifactError("runtime: lexer futures name a terminal that does not exist")
    ev_ptr = np.ascontiguousarray(dfa.ev_ptr, dtype=np.int32)
    ev_term = np.ascontiguousarray(dfa.ev_term, dtype=np.int32)
    ev_cond = np.ascontiguousarray(dfa.ev_cond, dtype=np.int32)
    _csr(ev_ptr, lex_n * 256, len(ev_term), "lexer ev_ptr")
    _in_range(ev_term, 0, max(len(names), 1), "lexer ev_term")
    _in_range(ev_cond, 0, n_conds, "lexer ev_cond")
    _in_range(lex_trans, -1, lex_n, "lexer trans")
    cond_trans = np.ascontiguousarray(dfa.cond_trans, dtype=np.int32)
    _in_range(cond_trans, 0, n_conds, "lexer cond_trans")
    cond_at_end = np.ascontiguousarray(dfa.cond_at_end, dtype=np.uint8)
    cond_sat = np.asarray([lexer.cond_satisfiable(c) for c in range(n_conds)], dtype=np.uint8)
    if cond_at_end.shape != (n_conds,) or lexer.initial < 0 or lexer.initial >= max(lex_n, 1):
        raise ArtifactError("runtime: inconsistent lexer arrays")

    lr = _lr_arrays(table, lr_of_lex)
    lr_n = lr["act_ptr"].shape[0] - 1

    n_classes = int(_want(stored, "n_classes", np.int64, 1)[0])
    if not 0 <= n_classes < 1 << 24:
        raise ArtifactError("runtime: implausible number of token classes")
    cw = max(1, (n_classes + 63) // 64)
    weights = _want(stored, "weights", np.uint64, 2)
    if weights.shape[1] != cw:
        raise ArtifactError(f"runtime array 'weights': {weights.shape[1]} words per weight, need {cw}")
    if n_classes % 64 and weights.shape[0] and bool((weights[:, -1] >> np.uint64(n_classes % 64)).any()):
        raise ArtifactError("runtime array 'weights': a bit names a class that does not exist")
    if n_classes == 0 and bool(weights.any()):
        raise ArtifactError("runtime array 'weights': bits set with no classes")
    n_w = weights.shape[0]
    bs = _want(stored, "boundary_states", np.int32, 1)
    start_accept = _want(stored, "start_accept", np.int32, 1)
    start_class = _want(stored, "start_class", np.int32, 1)
    start_ptr = _want(stored, "start_ptr", np.int32, 1)
    start_class_of = _want(stored, "start_class_of", np.int32, 1)
    start_target = _want(stored, "start_target", np.int32, 1)
    edge_ptr = _want(stored, "edge_ptr", np.int32, 1)
    edge_label = _want(stored, "edge_label", np.int32, 1)
    edge_target = _want(stored, "edge_target", np.int32, 1)
    edge_accept = _want(stored, "edge_accept", np.int32, 1)
    d_target = _want(stored, "default_target", np.int32, 1)
    d_accept = _want(stored, "default_accept", np.int32, 1)
    root_restrict = _want(stored, "root_restrict", np.int32, 1)
    pd_n = len(d_target)
    if (len(start_accept) != len(bs) or len(root_restrict) != len(bs) or len(d_accept) != pd_n
            or len(start_class_of) != len(start_target)):
        raise ArtifactError("runtime: Parser-DWA arrays disagree in length")
    if len(start_class) > lr_n:
        raise ArtifactError("runtime array 'start_class': more entries than LR states")
    n_start_classes = int(start_class.max()) + 1 if len(start_class) else 0
    _in_range(start_class, -1, n_start_classes, "start_class")
    _csr(start_ptr, len(bs), len(start_class_of), "start_ptr")
    _in_range(start_class_of, 0, n_start_classes, "start_class_of")
    if len(start_class_of) > 1:  # ascending within a root, as for edge_label
        unordered = start_class_of[1:] <= start_class_of[:-1]
        cuts = start_ptr[1:-1]
        unordered[cuts[(cuts > 0) & (cuts < len(start_class_of))] - 1] = False
        if bool(unordered.any()):
            raise ArtifactError("runtime array 'start_class_of': classes not ascending within a root")
    if not (len(edge_label) == len(edge_target) == len(edge_accept)):
        raise ArtifactError("runtime: Parser-DWA edge arrays disagree in length")
    _in_range(bs, 0, lex_n, "boundary_states")
    if len(np.unique(bs)) != len(bs):
        raise ArtifactError("runtime array 'boundary_states': repeated lexer state")
    _csr(edge_ptr, pd_n, len(edge_label), "edge_ptr")
    _in_range(edge_label, 0, lr_n, "edge_label")
    if len(edge_label) > 1:
        # a pair of neighbours out of order counts unless a row starts between them (no per-edge
        # row number: a large grammar has ~10 M edges)
        unordered = edge_label[1:] <= edge_label[:-1]
        starts = edge_ptr[1:-1]
        unordered[starts[(starts > 0) & (starts < len(edge_label))] - 1] = False
        if bool(unordered.any()):
            raise ArtifactError("runtime array 'edge_label': labels not ascending within a state")
    _in_range(start_target, 0, pd_n, "start_target")
    for name, x in (("edge_target", edge_target), ("default_target", d_target)):
        _in_range(x, -1, pd_n, name)
    for name, x in (("start_accept", start_accept), ("edge_accept", edge_accept), ("default_accept", d_accept),
                    ("root_restrict", root_restrict)):
        _in_range(x, -1, n_w, name)
    cond_ids = _want(stored, "cond_ids", np.int32, 1)
    cond_weight = _want(stored, "cond_weight", np.int32, 1)
    if len(cond_ids) != len(cond_weight):
        raise ArtifactError("runtime: condition arrays disagree in length")
    _in_range(cond_ids, 2, n_conds, "cond_ids")
    _in_range(cond_weight, -1, n_w, "cond_weight")
    cond_fail = np.full(n_conds, -2, dtype=np.int32)  # -2: no seed (the reference answers)
    cond_fail[:2] = -1
    cond_fail[cond_ids] = cond_weight
    root_of_lex = np.full(lex_n, -1, dtype=np.int32)
    root_of_lex[bs] = np.arange(len(bs), dtype=np.int32)

    class_of_orig = _want(stored, "class_of_orig", np.int32, 1)
    if class_of_orig.shape != (vocab.size,):
        raise ArtifactError(f"runtime array 'class_of_orig': {class_of_orig.shape[0]} ids for a vocabulary of {vocab.size}")
    _in_range(class_of_orig, -1, n_classes, "class_of_orig")
    out = {
        "lex_trans": lex_trans, "lex_initial": np.int64(lexer.initial), "ev_ptr": ev_ptr, "ev_term": ev_term,
        "ev_cond": ev_cond, "futures": futures, "cond_trans": cond_trans, "cond_at_end": cond_at_end,
        "cond_sat": cond_sat, "lr_of_lex": lr_of_lex, "lex_ignored": lex_ignored,
        **lr,
        "root_of_lex": root_of_lex, "root_restrict": root_restrict, "start_accept": start_accept,
        "start_class": start_class, "start_ptr": start_ptr, "start_class_of": start_class_of,
        "start_target": start_target,
        "edge_ptr": edge_ptr, "edge_label": edge_label, "edge_target": edge_target, "edge_accept": edge_accept,
        "default_target": d_target, "default_accept": d_accept, "weights": weights, "cond_fail": cond_fail,
    }
    out.update(_expansion_arrays(class_of_orig, n_classes, vocab.n_logits))
    out.update(_token_arrays(vocab, eos_ids))
    return out


def _lr_arrays(table, lr_of_lex: np.ndarray, *, check: bool = True) -> dict[str, np.ndarray]:
    """The LR table's sparse rows for the runtime (:class:`~glrmask.lr.table.LRTable`; the dense
    views are never materialized), checked unless ``check=False`` (a table built in this
    process is right by construction; one read from an artifact is untrusted)."""
    arrays = {name: np.ascontiguousarray(getattr(table, name), dtype=np.int32) for name in _LR_SPARSE}
    rule_len = np.asarray(table.rule_len, dtype=np.int32)
    rule_lhs = np.asarray(table.rule_lhs, dtype=np.int32)
    if check:
        _check_lr(table, arrays, rule_len, rule_lhs, lr_of_lex)
    out = {_LR_SPARSE[name]: a for name, a in arrays.items()}
    out.update({"rule_len": rule_len, "rule_lhs": rule_lhs, "lr_nterm": np.int64(table.n_terminals),
                "lr_nnt": np.int64(len(table.nonterminals)), "end_id": np.int64(table.end_id),
                "lr_start": np.int64(table.start_state)})
    return out


_LR_SPARSE = {"act_ptr": "act_ptr", "act_term": "act_term", "act_shift": "act_shift", "act_roff": "act_roff",
              "reduce_rules": "red_rules", "goto_ptr": "goto_ptr", "goto_nt": "goto_nt", "goto_tgt": "goto_tgt"}
"""LR table field -> runtime array name."""


def _check_lr(table, arrays: Mapping[str, np.ndarray], rule_len, rule_lhs, lr_of_lex) -> None:
    """The sparse rows well-formed and in range (:func:`glrmask.lr.table.check_sparse_rows`, all
    vectorized), and the rule and terminal maps consistent with them."""
    from glrmask.lr.table import check_sparse_rows

    lr_nterm, lr_nnt = table.n_terminals, len(table.nonterminals)
    if len(rule_len) != len(rule_lhs):
        raise ArtifactError("runtime: LR rule arrays disagree in length")
    lr_n = check_sparse_rows(arrays, lr_nterm, lr_nnt, len(rule_len),
                             lambda what: ArtifactError(f"runtime: LR table arrays are inconsistent: {what}"))
    _in_range(rule_lhs, 0, lr_nnt, "LR rule_lhs")
    _in_range(rule_len, 0, 1 << 20, "LR rule_len")
    _in_range(lr_of_lex, -1, lr_nterm, "terminal map")
    if not 0 <= table.start_state < lr_n or not 0 <= table.end_id < lr_nterm:
        raise ArtifactError("runtime: LR start state or end terminal out of range")


def _terminal_maps(names: Sequence[str], table, ignore: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Lexer terminal → LR terminal (-1: none) and whether the lexer terminal is ignored."""
    lr_of_lex = np.asarray([table.terminal_index.get(n, -1) for n in names] or [-1], dtype=np.int32)[:len(names)]
    ignored = set(ignore)
    return lr_of_lex, np.asarray([n in ignored for n in names], dtype=np.uint8)


def next_terminal_arrays(table, lr_of_lex: np.ndarray, lex_ignored: np.ndarray, fut_words: int) -> dict[str, np.ndarray]:
    """Which lexer terminals can come next, as bitsets of ``fut_words`` words (ignored terminals
    always among them): ``act_lex[s]``, those with an action (shift or reduce) in LR state ``s``
    — a superset of what stacks topped by ``s`` can shift, since a reduction needs the lookahead;
    ``follow_lex[a]``, those with an action in some state that shifting LR terminal ``a`` leads to.

    Why: the symbolic walks of lexeme memos do not know the stacks, but a token whose next lexeme
    holds only terminals that cannot follow the terminal before it is rejected by every stack, so
    those lanes are dropped while the memo is built instead of being walked (and their lexer
    states explored) to the end of every token."""
    from glrmask_ext.runtime import next_terminal_sets

    act, follow = next_terminal_sets(np.ascontiguousarray(table.act_ptr, dtype=np.int32),
                                     np.ascontiguousarray(table.act_term, dtype=np.int32),
                                     np.ascontiguousarray(table.act_shift, dtype=np.int32), table.n_terminals,
                                     np.ascontiguousarray(lr_of_lex, dtype=np.int32),
                                     np.ascontiguousarray(lex_ignored, dtype=np.uint8), fut_words)
    return {"act_lex": act, "follow_lex": follow}


def dynamic_arrays(lexer, table, ignore: Sequence[str], vocab, eos_ids: Sequence[int]) -> dict[str, np.ndarray]:
    """The arrays of dynamic tables (:meth:`glrmask_ext.runtime.Tables.attach_dynamic`): the LR
    table and the tokens as for a compiled mask; no Parser DWA and no token classes; the lexer
    arrays are placeholders (its rows are explored on demand), only its initial state and the
    width of its future sets count."""
    names = lexer.terminal_names
    lr_of_lex, lex_ignored = _terminal_maps(names, table, ignore)
    fut_words = max(1, (len(names) + 63) // 64)
    none = np.zeros(0, dtype=np.int32)
    out = {
        "lex_trans": np.full((1, 256), -1, dtype=np.int32), "lex_initial": np.int64(lexer.initial),
        "ev_ptr": np.zeros(257, dtype=np.int32), "ev_term": none, "ev_cond": none,
        "futures": np.zeros((1, fut_words), dtype=np.uint64), "cond_trans": np.zeros((2, 256), dtype=np.int32),
        "cond_at_end": np.asarray([1, 0], dtype=np.uint8), "cond_sat": np.asarray([1, 0], dtype=np.uint8),
        "lr_of_lex": lr_of_lex, "lex_ignored": lex_ignored,
        **_lr_arrays(table, lr_of_lex, check=False),
        **next_terminal_arrays(table, lr_of_lex, lex_ignored, fut_words),
        "root_of_lex": np.full(1, -1, dtype=np.int32), "root_restrict": none, "start_accept": none, "start_class": none,
        "start_ptr": np.zeros(1, dtype=np.int32), "start_class_of": none, "start_target": none,
        "edge_ptr": np.zeros(1, dtype=np.int32), "edge_label": none, "edge_target": none, "edge_accept": none,
        "default_target": none, "default_accept": none, "weights": np.zeros((0, 1), dtype=np.uint64),
        "cond_fail": np.full(2, -1, dtype=np.int32),
    }
    out.update(_vocab_arrays(vocab, eos_ids))
    return out


_VOCAB_ARRAYS: "dict[tuple, dict[str, np.ndarray]]" = {}
_VOCAB_ARRAYS_LOCK = threading.Lock()


def _vocab_arrays(vocab, eos_ids: Sequence[int]) -> dict[str, np.ndarray]:
    """The token arrays and the (empty) class expansion of dynamic tables: they depend only on
    the vocabulary, so every schema's dynamic engine shares one read-only copy per vocabulary and
    end tokens (computing them was a fifth of a small schema's engine set-up)."""
    key = (vocab.fingerprint, int(vocab.n_logits), tuple(sorted(set(int(e) for e in eos_ids))))
    with _VOCAB_ARRAYS_LOCK:
        hit = _VOCAB_ARRAYS.get(key)
    if hit is None:
        hit = {**_expansion_arrays(np.full(vocab.size, -1, dtype=np.int32), 0, vocab.n_logits),
               **_token_arrays(vocab, eos_ids)}
        for a in hit.values():
            if isinstance(a, np.ndarray) and a.flags.owndata:
                a.setflags(write=False)
        with _VOCAB_ARRAYS_LOCK:
            if len(_VOCAB_ARRAYS) >= 8:  # a few vocabularies per process at most
                _VOCAB_ARRAYS.pop(next(iter(_VOCAB_ARRAYS)))
            hit = _VOCAB_ARRAYS.setdefault(key, hit)
    return hit


def _expansion_arrays(class_of_orig: np.ndarray, n_classes: int, n_logits: int) -> dict[str, np.ndarray]:
    """Class → original ids, dense rows for the big classes and the union of all classes, and the
    expansion cost of each class (:func:`glrmask_ext.runtime.expansion_tables`)."""
    from glrmask_ext.runtime import expansion_tables

    return expansion_tables(np.ascontiguousarray(class_of_orig, dtype=np.int32), n_classes, n_logits,
                            _DENSE_MIN_TOKENS)


def _token_arrays(vocab, eos_ids: Sequence[int]) -> dict[str, np.ndarray]:
    """Token bytes and kinds (0 text, 1 never text, 2 end token)."""
    kind = np.zeros(vocab.size, dtype=np.uint8)
    lens = np.diff(np.asarray(vocab.token_offsets, dtype=np.int64))
    kind[lens == 0] = 1
    if vocab.special_token_ids:
        kind[np.fromiter(vocab.special_token_ids, dtype=np.int64)] = 1
    eos = np.asarray(sorted(set(int(e) for e in eos_ids)), dtype=np.int32)
    kind[eos] = 2
    return {"tok_bytes": np.ascontiguousarray(vocab.token_bytes_concat, dtype=np.uint8),
            "tok_off": np.ascontiguousarray(vocab.token_offsets, dtype=np.int64), "tok_kind": kind, "eos": eos}


def build_tables(arrays: Mapping[str, np.ndarray]):
    """The native :class:`glrmask_ext.runtime.Tables` over validated arrays."""
    from glrmask_ext.runtime import Tables

    return Tables(dict(arrays))
