"""The vocabulary a grammar is compiled against: the exact bytes each token id writes (DESIGN §7).

Everything downstream (the vocabulary trie, the masks, the artifact fingerprint) works on bytes,
never on token strings, because a grammar constrains the *output text* and a token string is an
encoding-specific spelling of it:

* byte-level BPE (GPT-2, Llama-3, Qwen, DeepSeek, Mistral Tekken as converted to tokenizer.json)
  spells bytes through the GPT-2 byte↔unicode table (``Ġ`` is a space);
* SentencePiece-style vocabularies (Llama-2, Mistral-7B v0.1, Unigram models) spell a space as
  ``▁`` — also at the start of a word-initial piece such as ``▁{`` — and, with byte fallback, a raw
  byte as ``<0xNN>``;
* added tokens marked ``special`` (BOS/EOS, chat markers) never stand for text: they have no bytes;
  added tokens not marked special (Qwen's ``<tool_call>``) are text with their literal content.

The scheme is decided from the tokenizer.json itself (model type, decoder, pre-tokenizer, byte
fallback), never from a file name. Ids in ``[size, n_logits)`` are padding up to the model's logits
width; they have no bytes and are never allowed.

A :class:`Vocab` is immutable (its arrays are read-only), so one instance is shared freely between
threads, compiled masks and a per-process cache.
"""
from __future__ import annotations

import functools
import gzip
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from glrmask.errors import VocabError

__all__ = ["Vocab", "TokenIdError", "WELL_KNOWN_EOS_NAMES", "gpt2_unicode_to_byte"]

#: Special-token names taken as end-of-sequence whenever the vocabulary has them as special tokens.
WELL_KNOWN_EOS_NAMES: tuple[str, ...] = (
    "</s>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|im_end|>",
)

_DEFAULT_RESOURCE = "gpt2.tokenizer.json.gz"
_SIDECARS = ("tokenizer_config.json", "generation_config.json")
_FINGERPRINT_TAG = b"glrmask.vocab.v1\n"
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")
_NOT_LATIN1 = re.compile("[^\x00-\xff]")
_SPM_SPACE = "\u2581"  # '▁', SentencePiece's visible space

# Scheme names, also exposed as ``Vocab.scheme`` (for messages and tests).
SCHEME_BYTE_LEVEL = "byte-level"
SCHEME_SENTENCEPIECE = "sentencepiece"
SCHEME_BYTES = "bytes"  # built from explicit byte strings (from_token_bytes)


class TokenIdError(VocabError, IndexError):
    """A token id outside ``[0, n_logits)`` was asked for."""


# --------------------------------------------------------------------------------------------------
# Byte-level BPE: the GPT-2 byte <-> unicode table


@functools.lru_cache(maxsize=1)
def gpt2_unicode_to_byte() -> dict[str, int]:
    """The inverse of GPT-2's byte→unicode table: printable Latin-1 bytes stand for themselves and
    the other 68 bytes (controls, space, 0x7F–0xA0, 0xAD) are shifted to U+0100 upward, in byte
    order, so every byte has a visible single-character spelling."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table: dict[str, int] = {chr(b): b for b in printable}
    others = [b for b in range(256) if chr(b) not in table]
    table.update((chr(0x100 + k), b) for k, b in enumerate(others))
    return table


@functools.lru_cache(maxsize=1)
def _byte_level_translation() -> dict[int, str]:
    """``str.translate`` table turning a byte-level piece into a Latin-1 string of its bytes.

    Characters below U+0100 that are *not* part of the table are sent to U+FFFF so that the
    following ``encode("latin-1")`` fails for them instead of silently accepting them as bytes; the
    caller then falls back to the piece's literal UTF-8, as the tokenizers ByteLevel decoder does."""
    table = {ord(c): chr(b) for c, b in gpt2_unicode_to_byte().items()}
    for code in range(0x100):
        table.setdefault(code, "\uffff")
    return table


def _byte_level_bytes(piece: str) -> bytes:
    try:
        return piece.translate(_byte_level_translation()).encode("latin-1")
    except UnicodeEncodeError:
        return piece.encode("utf-8")


# --------------------------------------------------------------------------------------------------
# Reading a tokenizer.json


def _flatten(component: Any, list_key: str) -> list[dict]:
    """The leaf components of a (possibly nested) ``Sequence`` normalizer/pre-tokenizer/decoder."""
    if not isinstance(component, dict):
        return []
    if component.get("type") == "Sequence":
        out: list[dict] = []
        for child in component.get(list_key) or []:
            out.extend(_flatten(child, list_key))
        return out
    return [component]


class _Scheme:
    """How the model's vocabulary pieces spell bytes, read off a parsed tokenizer.json."""

    def __init__(self, tj: Mapping[str, Any], where: str):
        model = tj.get("model") or {}
        self.model_type = model.get("type")
        if self.model_type is None:  # very old files have no "type"; infer from the vocab layout
            self.model_type = "Unigram" if isinstance(model.get("vocab"), list) else "BPE"
        if self.model_type not in ("BPE", "Unigram", "WordLevel"):
            raise VocabError(
                f"{where}: tokenizer model {self.model_type!r} is not supported (its pieces do not "
                "map to output bytes unambiguously); supported: byte-level BPE and SentencePiece-style "
                "BPE/Unigram"
            )
        decoders = _flatten(tj.get("decoder"), "decoders")
        pretoks = _flatten(tj.get("pre_tokenizer"), "pretokenizers")
        normalizers = _flatten(tj.get("normalizer"), "normalizers")
        kinds = {c.get("type") for c in decoders + pretoks}

        self.space_char: str | None = None
        for comp in decoders + pretoks:
            if comp.get("type") == "Metaspace":
                self.space_char = comp.get("replacement") or _SPM_SPACE
        for comp in decoders:  # Replace("▁" -> " ") decoder, the Llama/Mistral layout
            pattern = (comp.get("pattern") or {}).get("String")
            if comp.get("type") == "Replace" and comp.get("content") == " " and pattern:
                self.space_char = pattern
        for comp in normalizers:  # Replace(" " -> "▁") normalizer
            pattern = (comp.get("pattern") or {}).get("String")
            if comp.get("type") == "Replace" and pattern == " " and comp.get("content"):
                self.space_char = self.space_char or comp.get("content")

        byte_level = "ByteLevel" in kinds
        if byte_level and self.space_char is not None:
            raise VocabError(f"{where}: tokenizer mixes ByteLevel and SentencePiece spaces; unsupported")
        if byte_level:
            self.name = SCHEME_BYTE_LEVEL
        elif self.space_char is not None:
            self.name = SCHEME_SENTENCEPIECE
        else:
            raise VocabError(
                f"{where}: cannot tell how token pieces map to bytes (no ByteLevel or Metaspace/"
                "SentencePiece components in decoder or pre_tokenizer)"
            )
        self.byte_fallback = bool(model.get("byte_fallback")) or "ByteFallback" in {
            c.get("type") for c in decoders
        }

    def piece_bytes(self, piece: str) -> bytes:
        """The bytes a model-vocabulary piece writes."""
        if self.name == SCHEME_BYTE_LEVEL:
            return _byte_level_bytes(piece)
        if self.byte_fallback and len(piece) == 6:
            m = _BYTE_PIECE.fullmatch(piece)
            if m:
                return bytes([int(m.group(1), 16)])
        assert self.space_char is not None
        return piece.replace(self.space_char, " ").encode("utf-8")

    def pieces_bytes(self, pieces: Sequence[str]) -> list[bytes]:
        """``piece_bytes`` for a whole vocabulary at once.

        Byte-level pieces spell one byte per character, so the joined vocabulary is translated and
        encoded in one go and cut at the character offsets; only pieces holding characters outside
        the byte table (rare: some special tokens) are redone one by one."""
        if self.name != SCHEME_BYTE_LEVEL:
            return [self.piece_bytes(p) for p in pieces]
        translated = "".join(pieces).translate(_byte_level_translation())
        ends = np.cumsum(np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces)))
        raw = translated.encode("latin-1", errors="replace")
        starts = np.concatenate(([0], ends[:-1]))
        out = [raw[a:b] for a, b in zip(starts.tolist(), ends.tolist())]
        bad_positions = [m.start() for m in _NOT_LATIN1.finditer(translated)]
        for k in sorted(set(np.searchsorted(ends, bad_positions, side="right").tolist())):
            out[k] = pieces[k].encode("utf-8")
        return out

    def added_bytes(self, content: str, normalized: bool) -> bytes:
        """The bytes a non-special added token writes: its literal content. A SentencePiece added
        token matched on normalized text spells spaces as ``▁``, so those become spaces."""
        if self.name == SCHEME_SENTENCEPIECE and normalized:
            assert self.space_char is not None
            return content.replace(self.space_char, " ").encode("utf-8")
        return content.encode("utf-8")


def _model_pieces(tj: Mapping[str, Any], where: str) -> tuple[dict[str, int], list[int], list[str]]:
    """The model vocabulary as (piece → id, ids, pieces in the same order)."""
    model = tj.get("model") or {}
    vocab = model.get("vocab")
    if isinstance(vocab, dict):
        return vocab, [int(i) for i in vocab.values()], list(vocab.keys())
    if isinstance(vocab, list):  # Unigram: [[piece, score], ...], id = position
        pieces = [entry[0] for entry in vocab]
        piece_ids: dict[str, int] = {}
        for i, piece in enumerate(pieces):
            piece_ids.setdefault(piece, i)
        return piece_ids, list(range(len(pieces))), pieces
    raise VocabError(f"{where}: tokenizer.json has no model vocabulary")


def _model_unk_id(tj: Mapping[str, Any], piece_ids: Mapping[str, int]) -> int | None:
    """The model's unknown token: it stands for text it could not spell, so it is never text."""
    model = tj.get("model") or {}
    if isinstance(model.get("unk_id"), int):
        return model["unk_id"]
    unk = model.get("unk_token")
    return piece_ids.get(unk) if isinstance(unk, str) else None


def _read_text(path: Path) -> str:
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rb") as fh:
                return fh.read().decode("utf-8")
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise VocabError(f"cannot read tokenizer file {path}: {exc}") from exc


def _read_json_sidecar(path: Path) -> Any:
    """A JSON file beside the tokenizer (tokenizer_config.json …); None when absent, VocabError when
    malformed (a broken config would silently change the end tokens)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise VocabError(f"cannot read {path}: {exc}") from exc


def _eos_from_sidecars(directory: Path | None) -> tuple[list[str], list[int]]:
    """EOS token names (tokenizer_config.json ``eos_token``) and ids (generation_config.json
    ``eos_token_id``) found next to a tokenizer file."""
    names: list[str] = []
    ids: list[int] = []
    if directory is None:
        return names, ids
    config = _read_json_sidecar(directory / "tokenizer_config.json")
    if isinstance(config, dict):
        eos = config.get("eos_token")
        if isinstance(eos, dict):
            eos = eos.get("content")
        if isinstance(eos, str):
            names.append(eos)
    gen = _read_json_sidecar(directory / "generation_config.json")
    if isinstance(gen, dict):
        eos_id = gen.get("eos_token_id")
        if isinstance(eos_id, int):
            ids.append(eos_id)
        elif isinstance(eos_id, list):
            ids.extend(i for i in eos_id if isinstance(i, int))
    return names, ids


# --------------------------------------------------------------------------------------------------
# The Vocab


class Vocab:
    """Token ids → output bytes, plus which ids are special, which end a sequence, and how wide the
    model's logits are.

    Build one with :meth:`from_tokenizer_json`, :meth:`from_hf`, :meth:`from_pretrained`,
    :meth:`from_token_bytes` (tiny test vocabularies), :meth:`default` or :meth:`load` (CLI).

    Attributes:
        size: number of token ids the tokenizer defines (largest id + 1).
        n_logits: the model's logits width, ``>= size``; ids in ``[size, n_logits)`` are padding.
        eos_token_ids: end tokens (matched by id; DESIGN §2 "End tokens"). Always special.
        special_token_ids: ids below ``size`` that never stand for text (no bytes).
        fingerprint: hex SHA-256 over size, every token's bytes and the special ids; stable across
            runs and platforms. Artifacts record it to refuse a foreign vocabulary.
        token_bytes_concat: uint8 array, all tokens' bytes back to back (read-only).
        token_offsets: int64 array of ``size + 1`` offsets into ``token_bytes_concat`` (read-only).
        name: for messages (file path or hub name).
        scheme: how pieces were read: "byte-level", "sentencepiece" or "bytes".
    """

    __slots__ = (
        "size",
        "n_logits",
        "eos_token_ids",
        "special_token_ids",
        "fingerprint",
        "token_bytes_concat",
        "token_offsets",
        "name",
        "scheme",
        "_bytes",
        "_tokenizer",
        "_tokenizer_factory",
        "_special_mask",
    )

    size: int
    n_logits: int
    eos_token_ids: tuple[int, ...]
    special_token_ids: frozenset[int]
    fingerprint: str
    token_bytes_concat: np.ndarray
    token_offsets: np.ndarray
    name: str
    scheme: str

    def __init__(
        self,
        token_bytes: Sequence[bytes | None],
        *,
        special_token_ids: Iterable[int] = (),
        eos_token_ids: Iterable[int] = (),
        n_logits: int | None = None,
        name: str = "<vocab>",
        scheme: str = SCHEME_BYTES,
        tokenizer_factory: Callable[[], Any] | None = None,
    ):
        """Low-level constructor; prefer the ``from_*`` class methods.

        ``token_bytes[i]`` is token ``i``'s bytes, or None for a special token / an unused id.
        Special ids and end ids are stripped of bytes. A non-special token with no bytes cannot be
        text either and is made special."""
        size = len(token_bytes)
        if size == 0:
            raise VocabError(f"{name}: empty vocabulary")
        specials = set()
        for i in special_token_ids:
            specials.add(_check_id(i, size, name, "special token id"))
        eos: list[int] = []
        for i in eos_token_ids:
            i = _check_id(i, size, name, "eos token id")
            if i not in eos:
                eos.append(i)
        specials.update(eos)
        pieces: list[Any] = [b"" if b is None else b for b in token_bytes]
        for i in specials:
            pieces[i] = b""
        for i, b in enumerate(pieces):
            if type(b) is not bytes:
                if not isinstance(b, (bytearray, memoryview)):
                    raise VocabError(f"{name}: token {i} must be bytes or None, got {type(b).__name__}")
                pieces[i] = bytes(b)
        if n_logits is None:
            n_logits = size
        if isinstance(n_logits, bool) or not isinstance(n_logits, (int, np.integer)):
            raise VocabError(f"{name}: n_logits must be an integer, got {n_logits!r}")
        n_logits = int(n_logits)
        if n_logits < size:
            raise VocabError(
                f"{name}: n_logits={n_logits} is smaller than the vocabulary ({size} token ids); "
                "the model's logits must cover every token id"
            )

        lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=size)
        offsets = np.zeros(size + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        concat = np.frombuffer(b"".join(pieces), dtype=np.uint8).copy()
        special_mask = lengths == 0  # None, declared special, or no bytes: never text
        specials.update(np.flatnonzero(special_mask).tolist())
        for arr in (offsets, concat, special_mask):
            arr.flags.writeable = False

        self.size = size
        self.n_logits = n_logits
        self.eos_token_ids = tuple(eos)
        self.special_token_ids = frozenset(specials)
        self.token_bytes_concat = concat
        self.token_offsets = offsets
        self.name = name
        self.scheme = scheme
        # A tuple, not the list: a tuple of bytes is untracked by the cyclic collector after its
        # first collection, so the vocabulary's 100k+ references are not walked by every full
        # collection of a serving process (a list of atomic values stays tracked forever).
        self._bytes = tuple(pieces)
        self._special_mask = special_mask
        self._tokenizer = None
        self._tokenizer_factory = tokenizer_factory
        self.fingerprint = _fingerprint(size, offsets, concat, specials)

    # ---- queries -------------------------------------------------------------------------------

    def token_bytes(self, i: int) -> bytes:
        """The literal bytes token ``i`` writes; ``b""`` for special tokens and padding ids."""
        i = _check_id(i, self.n_logits, self.name, "token id", TokenIdError)
        return self._bytes[i] if i < self.size else b""

    def is_special(self, i: int) -> bool:
        """True when token ``i`` never stands for text: a special token or a padding id
        (``size <= i < n_logits``)."""
        i = _check_id(i, self.n_logits, self.name, "token id", TokenIdError)
        return i >= self.size or bool(self._special_mask[i])

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The bytes a sequence of token ids writes (special tokens write nothing)."""
        return b"".join(self.token_bytes(i) for i in ids)

    def encode(self, text: str) -> list[int]:
        """Token ids for ``text`` with the original tokenizer, no special tokens added (BOS etc.).

        Only for vocabularies built from a tokenizer (tokenizer.json, HF, hub)."""
        tok = self.tokenizer
        if tok is None:
            raise VocabError(
                f"{self.name}: encode() needs a tokenizer; this vocabulary was built from token "
                "bytes only"
            )
        return tok.encode(text, add_special_tokens=False).ids

    @property
    def tokenizer(self) -> Any:
        """The ``tokenizers.Tokenizer`` this vocabulary was read from (built on first use), or None
        for vocabularies given as bytes. For encoding and for engines that need the original."""
        if self._tokenizer is None and self._tokenizer_factory is not None:
            self._tokenizer = self._tokenizer_factory()
        return self._tokenizer

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return (
            f"Vocab({self.name!r}, size={self.size}, n_logits={self.n_logits}, "
            f"eos={list(self.eos_token_ids)}, specials={len(self.special_token_ids)}, "
            f"fingerprint={self.fingerprint[:12]})"
        )

    def __getstate__(self) -> dict[str, Any]:
        # The tokenizers object is rebuilt on demand after unpickling (e.g. in a worker process).
        # The token bytes travel once, as token_bytes_concat/token_offsets: pickling the tuple of
        # per-token bytes objects as well took ~10 ms for Llama-3.1 (of ~11 ms), CPU that auto mode's
        # watcher thread spends beside the decode loop when it hands the vocabulary to the
        # background compiler (and unpickling it there is faster too: 19 vs 24 ms).
        return {k: getattr(self, k) for k in self.__slots__ if k not in ("_tokenizer", "_bytes")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            if isinstance(value, np.ndarray):
                value.flags.writeable = False
            elif key == "_bytes":
                value = tuple(value)  # a pickle of an older version; untracked (see __init__)
            object.__setattr__(self, key, value)
        if "_bytes" not in state:
            object.__setattr__(self, "_bytes", _split_tokens(self.token_bytes_concat, self.token_offsets))
        object.__setattr__(self, "_tokenizer", None)

    def __setattr__(self, key: str, value: Any) -> None:
        if key == "_tokenizer" or not hasattr(self, "fingerprint"):
            object.__setattr__(self, key, value)
        else:
            raise AttributeError(f"Vocab is immutable (tried to set {key!r})")

    # ---- constructors --------------------------------------------------------------------------

    @classmethod
    def from_token_bytes(
        cls,
        tokens: Sequence[bytes | None],
        *,
        special_token_ids: Iterable[int] = (),
        eos_token_ids: Iterable[int] = (),
        n_logits: int | None = None,
        name: str = "<token bytes>",
    ) -> "Vocab":
        """A vocabulary given directly as bytes per id (tiny vocabularies for tests).

        ``None`` marks a special token (no bytes). End ids are special too."""
        return cls(
            list(tokens),
            special_token_ids=special_token_ids,
            eos_token_ids=eos_token_ids,
            n_logits=n_logits,
            name=name,
        )

    @classmethod
    def from_tokenizer_json(
        cls,
        path: str | os.PathLike,
        eos_token_ids: Sequence[int] | None = None,
        n_logits: int | None = None,
    ) -> "Vocab":
        """Read a HuggingFace ``tokenizer.json`` (or ``.json.gz``).

        End ids: ``eos_token_ids`` when given; otherwise the union of ``tokenizer_config.json``'s
        ``eos_token`` and ``generation_config.json``'s ``eos_token_id`` next to the file and the
        well-known end names present as special tokens (empty when none is found).

        Cached per process on (path, eos_token_ids, n_logits): the same Vocab object comes back
        while neither the file nor the config files beside it changed."""
        p = Path(path)
        try:
            st = p.stat()
        except OSError as exc:
            raise VocabError(f"cannot read tokenizer file {p}: {exc}") from exc
        if not p.is_file():
            raise VocabError(f"{p} is not a file (expected tokenizer.json or tokenizer.json.gz)")
        eos_key = None if eos_token_ids is None else tuple(int(i) for i in eos_token_ids)
        resolved = p.resolve()
        stamp = (st.st_mtime_ns, st.st_size, _sidecar_stamp(resolved.parent))
        return _cached_from_file(str(resolved), stamp, eos_key, n_logits, str(path))

    @classmethod
    def from_tokenizer_str(
        cls,
        text: str,
        *,
        eos_token_ids: Sequence[int] | None = None,
        n_logits: int | None = None,
        name: str = "<tokenizer.json>",
        sidecar_dir: str | os.PathLike | None = None,
        extra_eos_names: Iterable[str] = (),
        extra_eos_ids: Iterable[int] = (),
    ) -> "Vocab":
        """Build from the text of a tokenizer.json (the common path of every tokenizer loader).

        ``sidecar_dir`` is where tokenizer_config.json / generation_config.json are looked for;
        ``extra_eos_names`` / ``extra_eos_ids`` join the automatically found end tokens."""
        try:
            tj = json.loads(text)
        except ValueError as exc:
            raise VocabError(f"{name}: not valid JSON: {exc}") from exc
        if not isinstance(tj, dict):
            raise VocabError(f"{name}: not a tokenizer.json (top level is not an object)")
        scheme = _Scheme(tj, name)

        piece_ids, ids, pieces = _model_pieces(tj, name)
        by_id: dict[int, bytes | None] = dict(zip(ids, scheme.pieces_bytes(pieces)))
        specials: set[int] = set()
        special_by_content: dict[str, int] = {}
        for tok in tj.get("added_tokens") or []:
            i, content = int(tok["id"]), tok["content"]
            if tok.get("special"):
                specials.add(i)
                by_id[i] = None
                special_by_content.setdefault(content, i)
            else:
                by_id[i] = scheme.added_bytes(content, bool(tok.get("normalized")))
        unk = _model_unk_id(tj, piece_ids)
        if unk is not None and unk in by_id:
            specials.add(unk)
        if not by_id:
            raise VocabError(f"{name}: tokenizer.json defines no tokens")
        size = max(by_id) + 1
        if min(by_id) < 0:
            raise VocabError(f"{name}: negative token id {min(by_id)}")
        tokens: list[bytes | None] = [None] * size  # ids the file never defines stay special
        for i, b in by_id.items():
            tokens[i] = b

        if eos_token_ids is None:
            names, ids = _eos_from_sidecars(Path(sidecar_dir) if sidecar_dir is not None else None)
            names.extend(extra_eos_names)
            ids.extend(extra_eos_ids)
            found: set[int] = set()
            for n in names:  # a config naming a token the file lacks is ignored, not fatal
                if n in special_by_content:
                    found.add(special_by_content[n])
                elif n in piece_ids:
                    found.add(piece_ids[n])
            found.update(i for i in ids if 0 <= i < size)
            found.update(special_by_content[n] for n in WELL_KNOWN_EOS_NAMES if n in special_by_content)
            eos = tuple(sorted(found))
        else:
            eos = tuple(int(i) for i in eos_token_ids)

        return cls(
            tokens,
            special_token_ids=specials,
            eos_token_ids=eos,
            n_logits=n_logits,
            name=name,
            scheme=scheme.name,
            tokenizer_factory=functools.partial(_load_tokenizer, text, name),
        )

    @classmethod
    def from_hf(
        cls,
        tokenizer: Any,
        eos_token_ids: Sequence[int] | None = None,
        n_logits: int | None = None,
        *,
        model: Any = None,
        generation_config: Any = None,
    ) -> "Vocab":
        """From a ``transformers`` fast tokenizer (anything with a ``backend_tokenizer``).

        ``model`` (optional, a transformers model) supplies what the tokenizer does not know: the
        logits width (``n_logits`` defaults to its output embedding's rows, often padded past the
        tokenizer) and its ``generation_config``. ``generation_config`` (or the model's) adds its
        ``eos_token_id`` (int or list) to the end ids — chat models end a turn with a token the
        tokenizer's ``eos_token`` does not name.

        End ids when not given: the tokenizer's ``eos_token_id``, the generation config's, a
        ``generation_config.json`` in the tokenizer's local directory, and the well-known end names
        present as special tokens."""
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is None or not hasattr(backend, "to_str"):
            raise VocabError(
                f"{type(tokenizer).__name__} is not a fast (tokenizers-backed) tokenizer; load it with "
                "use_fast=True or pass its tokenizer.json to Vocab.from_tokenizer_json"
            )
        name = str(getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__)
        extra_ids: list[int] = []
        eos_id = getattr(tokenizer, "eos_token_id", None)
        if isinstance(eos_id, int):
            extra_ids.append(eos_id)
        if model is not None:
            if generation_config is None:
                generation_config = getattr(model, "generation_config", None)
            if n_logits is None:
                n_logits = _model_logits_width(model)
        if generation_config is not None:
            extra_ids.extend(_generation_config_eos(generation_config))
        sidecar = Path(name) if name and Path(name).is_dir() else None
        vocab = cls.from_tokenizer_str(
            backend.to_str(),
            eos_token_ids=eos_token_ids,
            n_logits=n_logits,
            name=name,
            sidecar_dir=sidecar,
            extra_eos_ids=extra_ids,
        )
        object.__setattr__(vocab, "_tokenizer", backend)
        return vocab

    @classmethod
    def from_gguf(
        cls,
        path: str | os.PathLike,
        eos_token_ids: Sequence[int] | None = None,
        n_logits: int | None = None,
    ) -> "Vocab":
        """Read the tokenizer metadata of a GGUF model file (llama.cpp's format; needs ``gguf``).

        The pieces are ``tokenizer.ggml.tokens`` with their ``token_type``: control, unknown and
        unused tokens are special; byte tokens (``<0xNN>``) are that raw byte; normal pieces are
        read by ``tokenizer.ggml.model`` — ``gpt2`` through the GPT-2 byte table, ``llama`` / ``t5``
        (SentencePiece) with ``▁`` as a space; user-defined tokens are text with their content.

        End ids when not given: ``tokenizer.ggml.eos_token_id`` / ``eot_token_id`` /
        ``eom_token_id`` and the well-known end names present as special tokens. ``n_logits``
        defaults to ``{architecture}.vocab_size`` when the file records it."""
        p = Path(path)
        if not p.is_file():
            raise VocabError(f"GGUF file {p} does not exist")
        try:
            import gguf  # noqa: PLC0415 - optional dependency
        except ImportError as exc:
            raise VocabError(f"{p}: reading a GGUF needs the 'gguf' package (pip install gguf)") from exc
        try:
            reader = gguf.GGUFReader(str(p))
        except Exception as exc:  # noqa: BLE001 - the reader raises ValueError, struct.error, ...
            raise VocabError(f"{p}: not a readable GGUF file: {exc}") from exc

        def field(key: str) -> Any:
            f = reader.fields.get(key)
            return None if f is None else f.contents()

        pieces = field("tokenizer.ggml.tokens")
        if not pieces:
            raise VocabError(f"{p}: the GGUF has no tokenizer.ggml.tokens")
        types = field("tokenizer.ggml.token_type") or [_GGUF_NORMAL] * len(pieces)
        if len(types) != len(pieces):
            raise VocabError(f"{p}: {len(types)} token types for {len(pieces)} tokens")
        model = field("tokenizer.ggml.model")
        if model == "gpt2":
            normal, scheme = _byte_level_bytes, SCHEME_BYTE_LEVEL
        elif model in ("llama", "t5"):
            normal, scheme = _sentencepiece_bytes, SCHEME_SENTENCEPIECE
        else:
            raise VocabError(
                f"{p}: tokenizer model {model!r} is not supported (byte-level 'gpt2' or SentencePiece "
                "'llama'/'t5' only)"
            )
        tokens: list[bytes | None] = []
        specials: list[int] = []
        special_by_content: dict[str, int] = {}
        for i, (piece, kind) in enumerate(zip(pieces, types)):
            byte = _BYTE_PIECE.fullmatch(piece) if kind == _GGUF_BYTE else None
            if kind in _GGUF_SPECIAL:
                tokens.append(None)
                specials.append(i)
                special_by_content.setdefault(piece, i)
            elif byte is not None:
                tokens.append(bytes([int(byte.group(1), 16)]))
            elif kind == _GGUF_USER_DEFINED:
                tokens.append(piece.encode("utf-8") if scheme == SCHEME_BYTE_LEVEL else _sentencepiece_bytes(piece))
            else:
                tokens.append(normal(piece))
        if eos_token_ids is None:
            found = {int(i) for key in _GGUF_EOS_KEYS if isinstance(i := field(key), int)
                     and 0 <= int(i) < len(tokens)}
            found.update(special_by_content[n] for n in WELL_KNOWN_EOS_NAMES if n in special_by_content)
            eos: Sequence[int] = sorted(found)
        else:
            eos = [int(i) for i in eos_token_ids]
        if n_logits is None:
            width = field(f"{field('general.architecture')}.vocab_size")
            n_logits = max(int(width), len(tokens)) if isinstance(width, int) else None
        return cls(tokens, special_token_ids=specials, eos_token_ids=eos, n_logits=n_logits,
                   name=str(path), scheme=scheme)

    @classmethod
    def from_pretrained(cls, name: str, **kw: Any) -> "Vocab":
        """Download ``tokenizer.json`` (+ tokenizer_config.json, generation_config.json when present)
        of a Hugging Face Hub model with ``huggingface_hub`` and build the Vocab.

        ``eos_token_ids`` and ``n_logits`` are the Vocab's; other keywords (``revision``, ``token``,
        ``cache_dir``, ``local_files_only`` …) go to ``huggingface_hub.hf_hub_download``.
        Missing package, no network or an unknown model raise :class:`VocabError`."""
        eos_token_ids = kw.pop("eos_token_ids", None)
        n_logits = kw.pop("n_logits", None)
        try:
            import huggingface_hub  # noqa: PLC0415 - optional dependency
        except ImportError as exc:
            raise VocabError(
                f"cannot load tokenizer {name!r} from the Hugging Face Hub: the huggingface_hub package "
                "is not installed (pip install huggingface_hub), or pass the path of a tokenizer.json"
            ) from exc
        try:
            main = huggingface_hub.hf_hub_download(name, "tokenizer.json", **kw)
        except Exception as exc:  # offline, unknown repo, gated model, no tokenizer.json …
            raise VocabError(
                f"cannot load tokenizer {name!r} from the Hugging Face Hub ({type(exc).__name__}: "
                f"{exc}); if offline, pass the path of a local tokenizer.json or directory"
            ) from exc
        directory = Path(main).parent
        for sidecar in ("tokenizer_config.json", "generation_config.json"):
            try:  # usually in the same snapshot directory as tokenizer.json
                huggingface_hub.hf_hub_download(name, sidecar, **kw)
            except Exception:  # noqa: BLE001 - optional files
                pass
        text = _read_text(Path(main))
        return cls.from_tokenizer_str(
            text, eos_token_ids=eos_token_ids, n_logits=n_logits, name=name, sidecar_dir=directory
        )

    @classmethod
    def default(cls) -> "Vocab":
        """The built-in default vocabulary: GPT-2 (50257 tokens, MIT), shipped in the package so the
        CLI works without ``--tokenizer``."""
        path = Path(__file__).resolve().parent / "data" / _DEFAULT_RESOURCE
        if not path.is_file():
            raise VocabError(f"the built-in default tokenizer is missing from the installation ({path})")
        return cls.from_tokenizer_json(path)

    @classmethod
    def load(cls, spec: str | os.PathLike | None) -> "Vocab":
        """Resolve a CLI ``--tokenizer`` value: None or ``"default"`` → :meth:`default`; a file →
        :meth:`from_tokenizer_json`; a directory holding tokenizer.json(.gz) → that file; anything
        else → :meth:`from_pretrained` (a hub name such as ``Qwen/Qwen3-8B``)."""
        if spec is None or (isinstance(spec, str) and spec == "default"):
            return cls.default()
        p = Path(spec)
        if p.is_file():
            return cls.from_tokenizer_json(p)
        if p.is_dir():
            for candidate in ("tokenizer.json", "tokenizer.json.gz"):
                if (p / candidate).is_file():
                    return cls.from_tokenizer_json(p / candidate)
            raise VocabError(f"directory {p} holds no tokenizer.json or tokenizer.json.gz")
        text = os.fspath(spec)
        if text.endswith((".json", ".json.gz")) or text.startswith((".", "/", "~")) or "\\" in text:
            raise VocabError(f"tokenizer file {text!r} does not exist")
        return cls.from_pretrained(text)


# --------------------------------------------------------------------------------------------------
# helpers


def _split_tokens(concat: np.ndarray, offsets: np.ndarray) -> tuple[bytes, ...]:
    """Each token's bytes from the concatenation and its offsets (the inverse of the join in
    :meth:`Vocab.__init__`)."""
    data = concat.tobytes()
    off = offsets.tolist()
    return tuple([data[a:b] for a, b in zip(off, off[1:])])


def _check_id(i: Any, bound: int, name: str, what: str, exc: type[VocabError] = VocabError) -> int:
    try:
        j = int(i)
    except (TypeError, ValueError):
        raise exc(f"{name}: {what} must be an integer, got {i!r}") from None
    if j != i or not 0 <= j < bound:
        raise exc(f"{name}: {what} {i!r} is outside [0, {bound})")
    return j


# GGUF token types (llama.cpp's llama_token_type)
_GGUF_NORMAL, _GGUF_UNKNOWN, _GGUF_CONTROL, _GGUF_USER_DEFINED, _GGUF_UNUSED, _GGUF_BYTE = 1, 2, 3, 4, 5, 6
_GGUF_SPECIAL = frozenset({_GGUF_UNKNOWN, _GGUF_CONTROL, _GGUF_UNUSED})
_GGUF_EOS_KEYS = ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id")


def _sentencepiece_bytes(piece: str) -> bytes:
    return piece.replace(_SPM_SPACE, " ").encode("utf-8")


def _generation_config_eos(generation_config: Any) -> list[int]:
    """``eos_token_id`` of a transformers GenerationConfig (or a dict): an int, a list, or absent."""
    if isinstance(generation_config, Mapping):
        value = generation_config.get("eos_token_id")
    else:
        value = getattr(generation_config, "eos_token_id", None)
    if isinstance(value, int):
        return [value]
    if isinstance(value, (list, tuple)):
        return [int(i) for i in value if isinstance(i, int)]
    return []


def _model_logits_width(model: Any) -> int | None:
    """Rows of a transformers model's output embedding (its logits width), else config.vocab_size."""
    get = getattr(model, "get_output_embeddings", None)
    head = get() if callable(get) else None
    weight = getattr(head, "weight", None)
    if weight is not None and getattr(weight, "ndim", 0) == 2:
        return int(weight.shape[0])
    width = getattr(getattr(model, "config", None), "vocab_size", None)
    return int(width) if isinstance(width, int) else None


def _fingerprint(size: int, offsets: np.ndarray, concat: np.ndarray, specials: Iterable[int]) -> str:
    h = hashlib.sha256(_FINGERPRINT_TAG)
    h.update(int(size).to_bytes(8, "little"))
    h.update(offsets.astype("<i8", copy=False).tobytes())
    h.update(concat.tobytes())
    h.update(np.array(sorted(specials), dtype="<i8").tobytes())
    return h.hexdigest()


def _load_tokenizer(text: str, name: str) -> Any:
    try:
        from tokenizers import Tokenizer  # noqa: PLC0415
    except ImportError as exc:
        raise VocabError(f"{name}: encode() needs the 'tokenizers' package") from exc
    try:
        return Tokenizer.from_str(text)
    except Exception as exc:  # noqa: BLE001 - tokenizers raises plain Exception
        raise VocabError(f"{name}: the tokenizers library cannot load this file: {exc}") from exc


def _sidecar_stamp(directory: Path) -> tuple[tuple[int, int] | None, ...]:
    """Modification stamps of the config files whose end tokens a cached Vocab depends on."""
    out = []
    for name in _SIDECARS:
        try:
            st = (directory / name).stat()
            out.append((st.st_mtime_ns, st.st_size))
        except OSError:
            out.append(None)
    return tuple(out)


@functools.lru_cache(maxsize=16)
def _cached_from_file(
    resolved: str,
    stamp: tuple,
    eos_token_ids: tuple[int, ...] | None,
    n_logits: int | None,
    display: str,
) -> Vocab:
    del stamp  # only part of the cache key: a changed file is read again
    path = Path(resolved)
    return Vocab.from_tokenizer_str(
        _read_text(path),
        eos_token_ids=eos_token_ids,
        n_logits=n_logits,
        name=display,
        sidecar_dir=path.parent,
    )
