"""``glrmask`` command line: compile, inspect, sample and check grammars against a tokenizer.

Every command defaults to the built-in tokenizer (GPT-2), so ``glrmask demo`` and ``glrmask sample
grammars/json.lark`` work on a fresh install with no downloads. ``sample`` and ``check`` take a
compiled artifact (``glrmask compile … -o out.glrm``) wherever they take a grammar.

Conventions (those of git, ruff and uv): results go to stdout, progress and warnings to stderr;
progress bars appear only on a terminal; ``-q`` silences everything but results and errors; every
outcome has its own exit code (:class:`ExitCode`, listed in ``glrmask --help``).
"""
from __future__ import annotations

import argparse
import codecs
import enum
import importlib
import importlib.util
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence
from urllib.parse import urlparse

import numpy as np

from .errors import GlrmaskError


class ExitCode(enum.IntEnum):
    """What a ``glrmask`` process exit status means (documented in ``--help`` and the README)."""

    OK = 0
    ERROR = 1       # the input (grammar, schema, tokenizer, artifact, file) cannot be used
    USAGE = 2       # the command line itself is wrong (argparse's convention)
    INCOMPLETE = 3  # check: a valid prefix, not a complete document; sample: a sample did not finish
    REJECTED = 4    # check: the text is not in the language (the report names the first bad byte)


class InputError(GlrmaskError):
    """A file or text given on the command line cannot be read (missing file, invalid JSON)."""


EXIT_CODES_HELP = """exit codes:
  0  success
  1  error: a grammar, schema, tokenizer, artifact or file cannot be used
  2  usage error: wrong command line
  3  incomplete: `check` got a valid prefix but not a complete document;
     `sample` produced a sample that did not finish within its token limit
  4  rejected: `check` found a byte the grammar does not allow"""

CACHE_HELP = """cache:
  Compiled grammars (static mode) and vocabulary tries are cached under $GLRMASK_CACHE_DIR,
  else $XDG_CACHE_HOME/glrmask, else ~/.cache/glrmask; a second compile of the same grammar for
  the same tokenizer loads in milliseconds. `glrmask cache info` shows it, `glrmask cache clear`
  empties it; --no-cache skips it for one command."""

EXAMPLES = """examples:
  glrmask demo                                          # what glrmask does, in 20 seconds
  glrmask check grammars/json.lark --text '{"a": [1, 2]}'
  glrmask sample grammars/json.lark -n 3 --seed 1
  glrmask compile grammars/sql.lark -o sql.glrm && glrmask inspect sql.glrm
  glrmask sample sql.glrm -n 3 --max-tokens 60
  glrmask sample --json-schema schema.json -n 3
  glrmask check --json-schema '{"type": "integer"}' --text 42
  glrmask sample grammars/sql.lark --tokenizer path/to/tokenizer.json
"""


# -- output ----------------------------------------------------------------------------------------

def _info(args: argparse.Namespace, message: str) -> None:
    """A line for the human on stderr, silenced by -q."""
    if not getattr(args, "quiet", False):
        print(message, file=sys.stderr, flush=True)


def _is_collision(warning: str) -> bool:
    return warning.startswith(("lookahead collision", "lookahead-collision check"))


def _report_warnings(args: argparse.Namespace, warnings: Sequence[str]) -> None:
    """All warnings with --warnings; else one line counting them (nothing with -q)."""
    if getattr(args, "warnings", False):
        for w in warnings:
            print(f"warning: {w}", file=sys.stderr)
        return
    if not warnings:
        return
    collisions = sum(1 for w in warnings if _is_collision(w))
    parts = []
    if collisions:
        parts.append(f"{collisions} possible lookahead collision{'s' if collisions != 1 else ''}")
    if len(warnings) > collisions:
        other = len(warnings) - collisions
        parts.append(f"{other} other warning{'s' if other != 1 else ''}")
    _info(args, f"warning: {' and '.join(parts)} (--warnings lists them)")


class _StageProgress:
    """A progress bar over the static compile's stages (tqdm, on stderr, on a terminal only)."""

    STAGES = ("dense lexer", "stack effects", "terminal DWA", "token classes", "parser DWA")

    def __init__(self, args: argparse.Namespace, what: str) -> None:
        self._bar = None
        if getattr(args, "quiet", False):
            return
        from tqdm import tqdm

        self._bar = tqdm(total=len(self.STAGES), desc=f"compiling {what}", unit="stage", leave=False,
                         file=sys.stderr, disable=None, dynamic_ncols=True,
                         bar_format="{desc}: {n_fmt}/{total_fmt} stages |{bar}| {elapsed}{postfix}")

    def __call__(self, name: str, seconds: float, info: dict) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(f"{name} done in {seconds:.2f}s", refresh=False)
            self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


# -- sources ---------------------------------------------------------------------------------------

def _add_source_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("grammar", nargs="?", default=None,
                   help="grammar file (.lark, .gbnf/.ebnf), grammar text, or a compiled .glrm artifact; "
                        "omit it with --json-schema")
    p.add_argument("--json-schema", dest="json_schema", metavar="SCHEMA", default=None,
                   help="constrain to a JSON Schema (a .json file or JSON text) instead of a grammar")
    p.add_argument("--lenient", action="store_true",
                   help="with --json-schema: ignore unsupported keywords (reported as warnings) instead of failing")
    p.add_argument("--tokenizer", default=None,
                   help="tokenizer.json(.gz), a directory holding one, or a Hugging Face hub name "
                        "(needs huggingface_hub and a network, or the hub's local cache); default: built-in GPT-2")
    p.add_argument("--start", default=None, help="start rule (default: 'start' for Lark, 'root' for GBNF)")
    p.add_argument("--format", default="auto", choices=["auto", "lark", "gbnf", "ebnf", "regex"],
                   help="grammar format (default: by file extension, else by content)")
    p.add_argument("--no-cache", dest="no_cache", action="store_true",
                   help="do not read or write the compile cache")
    _add_output_args(p)


def _add_output_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--warnings", action="store_true",
                   help="list every warning (default: one line counting them)")
    p.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                   help="print only results and errors (no progress, no warning count)")


def _is_artifact(path: Optional[str]) -> bool:
    from .artifact import MAGIC

    try:
        with open(path, "rb") as f:  # type: ignore[arg-type]
            return f.read(len(MAGIC)) == MAGIC
    except (OSError, TypeError, ValueError):
        return False


def _check_source_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Exactly one of GRAMMAR and --json-schema; the grammar-only options make no sense with a schema."""
    if args.json_schema is None:
        if args.grammar is None:
            parser.error("give a GRAMMAR or --json-schema SCHEMA")
        if args.lenient:
            parser.error("--lenient only applies to --json-schema")
        return
    if args.grammar is not None:
        parser.error("give either a GRAMMAR or --json-schema, not both")
    if args.start is not None or args.format != "auto":
        parser.error("--start and --format do not apply to --json-schema")


def _json_error(e: json.JSONDecodeError, where: str) -> InputError:
    line = e.doc.splitlines()[e.lineno - 1] if e.doc.splitlines() else ""
    caret = " " * (e.colno - 1) + "^"
    return InputError(f"{where}: invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}\n  {line}\n  {caret}")


def read_schema_arg(text: str) -> Any:
    """The schema a ``--json-schema`` value names: a file's JSON, or the value itself as JSON.

    Why here and not in the lowering: only the command line knows that the user typed this, so
    only it can say *which* reading failed and where (the JSON parse position, or the missing
    file) instead of "neither JSON nor an existing file"."""
    stripped = text.strip()
    looks_like_json = stripped[:1] in ("{", "[", '"') or stripped in ("true", "false", "null")
    if not looks_like_json:
        path = Path(text).expanduser()
        if not path.is_file():
            raise InputError(f"--json-schema: no such file: {text}" if not path.exists()
                             else f"--json-schema: not a file: {text}")
        try:
            content = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise InputError(f"--json-schema: cannot read {text}: {e}") from None
        try:
            return json.loads(content)
        except json.JSONDecodeError as e:
            raise _json_error(e, text) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise _json_error(e, "--json-schema") from None


def _hub_endpoint() -> tuple[str, int]:
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    return url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)


def _hub_reachable(host: str, port: int, timeout: float = 3.0) -> bool:
    """One TCP connect to the hub (about a round trip), instead of the client's 24 s of retries."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def load_vocab(spec: Optional[str]):
    """Resolve ``--tokenizer``: the built-in default, a file, a directory, or a hub name.

    A hub name is looked up in the hub's local cache first; only when it is not there does it need
    the network, which is checked with one cheap connection first (unless a proxy is configured or
    ``HF_HUB_OFFLINE`` is set), so an offline machine fails in a second with a clear message."""
    from .errors import VocabError
    from .vocab import Vocab

    if spec is None or spec == "default":
        return Vocab.default()
    p = Path(spec).expanduser()
    looks_like_path = p.exists() or spec.endswith((".json", ".json.gz")) or spec.startswith((".", "/", "~")) \
        or "\\" in spec or spec.count("/") > 1
    if looks_like_path:
        return Vocab.load(str(p))
    try:
        import huggingface_hub  # noqa: F401 - optional dependency
    except ImportError:
        raise VocabError(f"--tokenizer {spec}: no such file, and loading it from the Hugging Face Hub needs "
                         "the huggingface_hub package (pip install huggingface_hub)") from None
    try:
        return Vocab.from_pretrained(spec, local_files_only=True)
    except VocabError:
        pass  # not in the local hub cache
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    if offline:
        raise VocabError(f"--tokenizer {spec}: not in the local Hugging Face cache and HF_HUB_OFFLINE is set; "
                         "pass the path of a tokenizer.json or a directory holding one")
    proxied = any(os.environ.get(k) for k in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"))
    host, port = _hub_endpoint()
    if not proxied and not _hub_reachable(host, port):
        raise VocabError(f"--tokenizer {spec}: not in the local Hugging Face cache and {host} cannot be reached "
                         "(offline?); pass the path of a tokenizer.json or a directory holding one")
    return Vocab.from_pretrained(spec)


_BUILTIN_DATA = Path(__file__).resolve().parent / "data"


def _vocab_label(name: str) -> str:
    """``built-in GPT-2`` for the bundled tokenizer, else the name the vocabulary was loaded by."""
    return "built-in GPT-2" if Path(name).parent == _BUILTIN_DATA else name


def _load(args: argparse.Namespace, *, mode: Optional[str] = None):
    """The vocabulary and the mask the source arguments describe (compiled, cached or loaded)."""
    from .api import Mask, compile_grammar, compile_json_schema
    from .compile_cache import default_compile_cache_dir
    from .grammar.loader import load_grammar

    vocab = load_vocab(args.tokenizer)
    mode = mode or getattr(args, "mode", None)
    cache_dir = None if args.no_cache else default_compile_cache_dir()
    if args.json_schema is not None:
        schema = read_schema_arg(args.json_schema)
        if mode == "static":  # lowered here so that its stages show progress
            from .json_schema import lower_json_schema_ir

            grammar, lowering_warnings = lower_json_schema_ir(schema, lenient=args.lenient)
            grammar.warnings.extend(lowering_warnings)
            mask = _compile_with_progress(args, "JSON Schema", lambda on_stage: compile_grammar(
                grammar, vocab, mode="static", cache_dir=cache_dir, on_stage=on_stage))
        else:
            mask = compile_json_schema(schema, vocab, lenient=args.lenient, **({"mode": mode} if mode else {}))
    elif _is_artifact(args.grammar):
        mask = Mask.load(args.grammar, vocab)
    else:
        grammar = load_grammar(args.grammar, format=args.format, start=args.start)
        mode = mode or "static"
        label = Path(args.grammar).name if _is_file(args.grammar) else "grammar"
        if mode == "static":
            mask = _compile_with_progress(args, label, lambda on_stage: compile_grammar(
                grammar, vocab, mode="static", cache_dir=cache_dir, on_stage=on_stage))
        else:
            mask = compile_grammar(grammar, vocab, mode=mode)
    _report_warnings(args, mask.warnings)
    return vocab, mask


def _is_file(s: str) -> bool:
    try:
        return "\n" not in s and len(s) < 4096 and Path(s).is_file()
    except (OSError, ValueError):
        return False


def _compile_with_progress(args: argparse.Namespace, what: str, build: Callable[[Any], Any]):
    progress = _StageProgress(args, what)
    try:
        return build(progress)
    finally:
        progress.close()


# -- sample ----------------------------------------------------------------------------------------

def allowed_ids(bits: np.ndarray, n: Optional[int] = None) -> np.ndarray:
    """Token ids whose bit is set in a packed int32 mask (the first ``n`` ids when given)."""
    u = np.unpackbits(bits.view(np.uint8), bitorder="little")
    return np.flatnonzero(u[:n] if n is not None else u)


class TokenChooser:
    """How ``sample`` picks among the allowed tokens: readable and finishing, not a language model.

    Why not uniform: most allowed tokens are alike (a hundred digit tokens against one ``,``,
    thousands of word pieces against one closing quote), so uniform draws make 300-digit numbers
    and endless strings. Instead, every step draws a first byte uniformly among those the mask
    allows (the digits and ``-`` as one; whitespace, non-ASCII, control bytes and escapes damped), then a
    token starting with it. From half
    of ``max_tokens`` on it also prefers to finish: it looks one token ahead at a few candidates
    and favours those after which the text could end, then those that change what is allowed
    (not one more letter, digit or space) towards fewer choices (a closed string or bracket leaves
    few, an opened one many), increasingly so until, past ``max_tokens``, it takes the best; an end token is taken, once allowed, with a probability that grows to 1 there (at
    once when only whitespace could follow).
    All of it is numpy over the mask; only the few look-ahead candidates are committed.
    """

    CANDIDATES = 8

    def __init__(self, mask, rng: np.random.Generator, max_tokens: int) -> None:
        vocab = mask.vocab
        self.mask = mask
        self.rng = rng
        self.max_tokens = max(1, int(max_tokens))
        self.n = int(vocab.n_logits)
        offsets = np.asarray(vocab.token_offsets, dtype=np.int64)
        concat = np.asarray(vocab.token_bytes_concat, dtype=np.uint8)
        size = int(vocab.size)
        lengths = np.zeros(self.n, dtype=np.int64)
        lengths[:size] = np.diff(offsets)
        first = np.full(self.n, 256, dtype=np.int64)  # 256: no bytes (special or padding)
        has = lengths[:size] > 0
        first[:size][has] = concat[offsets[:size][has]]
        for i in vocab.special_token_ids:
            lengths[i], first[i] = 0, 256
        starts = offsets[:-1][has]

        def count(byte_class: np.ndarray) -> np.ndarray:
            """Per token: how many of its bytes are in ``byte_class`` (a bool table over 0..255)."""
            out = np.zeros(self.n, dtype=np.int64)
            if starts.size:
                out[np.flatnonzero(has)] = np.add.reduceat(byte_class[concat].astype(np.int64), starts)
            return out

        table = np.zeros(256, dtype=bool)
        table[[9, 10, 13, 32]] = True
        whitespace = (lengths > 0) & (count(table) == lengths)  # every byte \t \n \r or space
        weight = np.ones(self.n)
        # some layout, not runs of it: spaces, fewer newlines, rarely tabs or carriage returns
        layout = np.select([first == 32, first == 10], [0.2, 0.1], 0.02)
        weight[whitespace] = layout[whitespace] / np.maximum(lengths[whitespace], 1)
        non_ascii = np.zeros(256, dtype=bool)
        non_ascii[128:] = True
        weight[count(non_ascii) > 0] *= 0.02  # multi-byte text: allowed, rarely drawn
        control = np.zeros(256, dtype=bool)
        control[:32] = True
        control[[9, 10, 13]] = False
        weight[count(control) > 0] *= 0.02
        backslash = np.zeros(256, dtype=bool)
        backslash[ord("\\")] = True
        weight[count(backslash) > 0] *= 0.005  # escapes: valid, rare in real text
        self.lengths, self.first, self.weight, self.whitespace = lengths, first, weight, whitespace
        # what a draw is uniform over: the first byte, the ten digits and the minus sign counting as
        # one (else numbers outweigh everything else wherever they may start or go on)
        self.kind = np.where(((first >= 48) & (first <= 57)) | (first == 45), 48, first)
        self.eos = np.asarray(sorted(vocab.eos_token_ids), dtype=np.int64)
        self.is_eos = np.zeros(self.n, dtype=bool)
        self.is_eos[self.eos] = True

    def only_layout(self, ids: np.ndarray) -> bool:
        """Every token in ``ids`` is whitespace: once the text could end, going on adds nothing."""
        return bool(self.whitespace[ids].all())

    def end_probability(self, n_tok: int) -> float:
        return min(1.0, 0.15 + 0.85 * n_tok / self.max_tokens)

    def _draw(self, ids: np.ndarray, k: int) -> np.ndarray:
        """Up to ``k`` distinct ids: a first byte (digits and ``-`` count as one) with probability
        proportional to its tokens' mean weight, then a token starting with it in proportion to its
        weight."""
        kind = self.kind[ids]
        p = self.weight[ids] / np.bincount(kind, minlength=257)[kind]
        if k == 1:  # inverse CDF: O(n), where Generator.choice(p=…) sorts
            cdf = np.cumsum(p)
            j = min(int(np.searchsorted(cdf, self.rng.random() * cdf[-1], side="right")), len(ids) - 1)
            return ids[j:j + 1]
        # k without replacement: the k smallest exponential race times (Efraimidis–Spirakis)
        race = self.rng.exponential(size=len(ids)) / p
        k = min(k, len(ids))
        return ids[np.argpartition(race, k - 1)[:k]]

    def choose(self, state, ids: np.ndarray, n_tok: int) -> int:
        """The next token among ``ids`` (allowed, no end token among them) after ``n_tok`` tokens."""
        progress = n_tok / self.max_tokens
        if progress < 0.5:
            return int(self._draw(ids, 1)[0])
        # damped tokens (escapes …) are no candidates: they would win on small masks alone
        plain = ids[self.weight[ids] >= 0.05]
        candidates = self._draw(plain if plain.size else ids, self.CANDIDATES)
        if progress >= 1.0:  # past the budget: short tokens only, and every short mark and space
            short = ids[self.lengths[ids] == self.lengths[ids].min()]
            marks = short[(self.first[short] < 128) & ~np.isin(self.first[short], _ALNUM)]
            if len(marks) > 2 * self.CANDIDATES:
                marks = self.rng.choice(marks, size=2 * self.CANDIDATES, replace=False)
            candidates = np.unique(np.concatenate([candidates[self.lengths[candidates] == self.lengths[short[0]]],
                                                   marks, short[:1]]))
        here = self.mask.get_mask(state)
        score = np.empty(len(candidates))
        for j, tok in enumerate(candidates):
            probe = state.fork()
            probe.commit(int(tok))
            bits = self.mask.get_mask(probe)
            allowed = allowed_ids(bits, self.n)
            if self.is_eos[allowed].any() or (not self.eos.size and probe.is_accepting()):
                score[j] = 0.0  # the text could end right after it
            elif np.array_equal(bits, here):
                score[j] = 30.0  # the same choices as now: layout, one more letter or digit
            else:
                score[j] = np.log(max(1, len(allowed)))
        sharpness = 16.0 * (progress - 0.5) if progress < 1.0 else 50.0
        logits = -sharpness * score
        p = np.exp(logits - logits.max())
        return int(self.rng.choice(candidates, p=p / p.sum()))


_ALNUM = np.array([*range(48, 58), *range(65, 91), *range(97, 123)])


def sample_tokens(mask, chooser: TokenChooser, rng: np.random.Generator, limit: int,
                  on_token: Callable[[int], None]) -> tuple[bool, int]:
    """Draw one sample, calling ``on_token`` for each text token: (finished, tokens drawn).

    A sample finishes when the text is complete and the draw takes the end (an end token when the
    vocabulary has one, else simply stopping); it does not when no token is allowed (a dead end)
    or ``limit`` tokens were drawn first."""
    eos = chooser.eos
    state = mask.start()
    for n_tok in range(limit):
        ids = allowed_ids(mask.get_mask(state), chooser.n)
        end = chooser.is_eos[ids]
        eos_ok, rest = ids[end], ids[~end]
        can_end = eos_ok.size > 0 or (eos.size == 0 and state.is_accepting())
        if can_end and (rest.size == 0 or chooser.only_layout(rest) or rng.random() < chooser.end_probability(n_tok)):
            if eos_ok.size:
                state.commit(int(eos_ok[0]))
            return True, n_tok + (1 if eos_ok.size else 0)
        if rest.size == 0:
            return False, n_tok
        tok = chooser.choose(state, rest, n_tok)
        state.commit(tok)
        on_token(tok)
    return False, limit


def cmd_sample(args: argparse.Namespace) -> int:
    vocab, mask = _load(args)
    rng = np.random.default_rng(args.seed)
    chooser = TokenChooser(mask, rng, args.max_tokens)
    limit = args.max_tokens * (1 + args.finish_factor)
    out = sys.stdout
    unfinished = []
    for k in range(1, args.n + 1):
        out.write(("\n" if k > 1 else "") + f"# sample {k}\n")
        dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
        last = ["\n"]

        def write(tok: int) -> None:
            piece = dec.decode(vocab.token_bytes(tok))
            if piece:
                out.write(piece)
                out.flush()
                last[0] = piece[-1]

        finished, n_tok = sample_tokens(mask, chooser, rng, limit, write)
        tail = dec.decode(b"", final=True)
        out.write(tail + ("" if (tail or last[0])[-1] == "\n" else "\n"))
        if finished:
            out.write(f"# sample {k}: complete, {n_tok} tokens\n")
        else:
            why = f"token limit ({limit}) reached" if n_tok >= limit else \
                "no token is allowed (a dead end, see --warnings)"
            out.write(f"# sample {k}: INCOMPLETE after {n_tok} tokens, {why}; not a valid output\n")
            unfinished.append(k)
        out.flush()
    if unfinished:
        which = ", ".join(map(str, unfinished))
        print(f"error: {len(unfinished)} of {args.n} samples did not finish (sample {which}); raise --max-tokens "
              f"or --finish-factor", file=sys.stderr)
        return ExitCode.INCOMPLETE
    return ExitCode.OK


# -- check -----------------------------------------------------------------------------------------

def _first_bad_byte(state, data: bytes) -> int:
    """How many bytes of ``data`` the state accepts before the first one it refuses."""
    probe = state.fork()
    for j in range(len(data)):
        if not probe.commit_bytes(data[j:j + 1]):
            return j
    return len(data)


def _line_col(raw: bytes, pos: int) -> tuple[int, int, str]:
    start = raw.rfind(b"\n", 0, pos) + 1
    end = raw.find(b"\n", pos)
    line = raw[start:end if end >= 0 else len(raw)]
    col = len(raw[start:pos].decode("utf-8", "replace"))
    return raw.count(b"\n", 0, pos) + 1, col + 1, line.decode("utf-8", "replace")


def check_text(vocab, mask, text: str) -> tuple[ExitCode, list[str]]:
    """Replay ``text``'s tokens through the masks: the verdict and the lines that explain it."""
    ids = vocab.encode(text)
    raw = text.encode("utf-8")
    state = mask.start()
    pos = 0
    for i, tok in enumerate(ids):
        data = vocab.token_bytes(tok)
        if not state.commit(tok):
            bad = pos + _first_bad_byte(state, data)
            line_no, col, line = _line_col(raw, bad)
            shown = raw[bad:bad + 1] if bad < len(raw) else b""
            what = repr(shown.decode("utf-8", "replace")) if shown else "the end token"
            caret = " " * (col - 1) + "^"
            return ExitCode.REJECTED, [
                f"rejected at byte {bad} (line {line_no}, column {col}): {what} is not allowed there",
                f"  {line}",
                f"  {caret}",
                f"  (token {i}, id {tok}, {data!r}, starts at byte {pos})",
            ]
        pos += len(data)
    if state.is_accepting():
        return ExitCode.OK, [f"ok: complete ({len(ids)} tokens)"]
    return ExitCode.INCOMPLETE, [f"incomplete: all {len(ids)} tokens are allowed, but the text is not a "
                                 f"complete document (a valid prefix)"]


def cmd_check(args: argparse.Namespace) -> int:
    if args.text is not None:
        text = args.text
    else:
        try:
            text = Path(args.file).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise InputError(f"--file: no such file: {args.file}") from None
        except (OSError, UnicodeDecodeError) as e:
            raise InputError(f"--file: cannot read {args.file}: {e}") from None
    vocab, mask = _load(args)
    code, lines = check_text(vocab, mask, text)
    print("\n".join(lines))
    return code


# -- compile / inspect -----------------------------------------------------------------------------

def cmd_compile(args: argparse.Namespace) -> int:
    if args.json_schema is None and _is_artifact(args.grammar):
        raise InputError(f"{args.grammar} is already a compiled artifact (see `glrmask inspect {args.grammar}`)")
    out = args.output or (Path(args.grammar).stem if args.grammar and Path(args.grammar).is_file()
                          else "grammar") + ".glrm"
    t0 = time.perf_counter()
    _vocab, mask = _load(args, mode="static")
    compile_seconds = time.perf_counter() - t0
    try:
        mask.save(out)
    except OSError as e:
        raise InputError(f"cannot write {out}: {e}") from None
    size = Path(out).stat().st_size
    print(f"wrote {out}: {size / 1e6:.2f} MB ({compile_seconds:.2f} s)")
    _print_stages(mask.stats, sys.stdout)
    return ExitCode.OK


def _print_stages(stats: dict, out) -> None:
    """One line per compile stage: its time (a fresh compile; artifacts store sizes only, so that
    compiles are byte-for-byte reproducible) and its sizes."""
    total, timed = 0.0, False
    for name, info in stats.items():
        if not isinstance(info, dict):
            continue
        detail = ", ".join(f"{k}={v}" for k, v in info.items() if k != "seconds")
        if "seconds" in info:
            secs = float(info["seconds"])
            total, timed = total + secs, True
            out.write(f"  {name:<16} {secs:8.3f} s  {detail}\n")
        else:
            out.write(f"  {name:<16} {detail}\n")
    if timed:
        out.write(f"  {'total':<16} {total:8.3f} s\n")


def cmd_inspect(args: argparse.Namespace) -> int:
    from .artifact import read_artifact
    from .grammar.ir import Grammar
    from .mask_artifact import ARTIFACT_KIND
    from .vocab import Vocab

    if not Path(args.artifact).is_file():
        raise InputError(f"no such file: {args.artifact}")
    art = read_artifact(args.artifact, kind=ARTIFACT_KIND)
    meta, header = art.meta, art.header
    grammar = Grammar.from_json(meta["grammar"])
    nbytes = sum(int(a.nbytes) for a in art.arrays.values())
    fingerprint = meta["vocab_fingerprint"]
    name, eos = meta.get("vocab_name"), meta.get("eos_token_ids")
    if args.tokenizer or name is None or eos is None:  # name it from a tokenizer we hold, if it is that one
        known = load_vocab(args.tokenizer) if args.tokenizer else Vocab.default()
        if known.fingerprint == fingerprint:
            name = known.name if name is None else name
            eos = list(known.eos_token_ids) if eos is None else eos
        elif args.tokenizer:
            raise InputError(f"{args.artifact} was compiled for another tokenizer than {args.tokenizer} "
                             f"(fingerprint {fingerprint[:16]}…)")
    name = _vocab_label(name) if name is not None else "(name not recorded; --tokenizer names it)"
    print(f"artifact      {args.artifact} ({Path(args.artifact).stat().st_size / 1e6:.2f} MB, "
          f"{len(art.arrays)} arrays, {nbytes / 1e6:.2f} MB of array data)")
    print(f"format        {header.get('format_version')} (glrmask {art.glrmask_version}, "
          f"python {art.python_version}, unicodedata {art.unicodedata_version})")
    print(f"tokenizer     {name}: {meta['vocab_size']:,} tokens, {meta['n_logits']:,} logits, "
          f"end tokens {list(eos) if eos is not None else '(not recorded)'}")
    print(f"              fingerprint {fingerprint}")
    print(f"grammar       start {grammar.start!r}, {len(grammar.rules)} rules (normalized), "
          f"{len(grammar.terminals)} terminals, ignore {sorted(grammar.ignore)}")
    warnings = meta.get("warnings", [])
    print(f"warnings      {len(warnings)}" + ("" if args.warnings or not warnings else " (--warnings lists them)"))
    if args.warnings:
        for w in warnings:
            print(f"  {w}")
    print("stages:")
    _print_stages(dict(meta.get("stages", [])), sys.stdout)
    if args.arrays:
        print("arrays:")
        for aname, a in sorted(art.arrays.items()):
            print(f"  {aname:<28} {str(a.dtype):<8} {json.dumps(list(a.shape)):<16} {a.nbytes:>10} B")
    return ExitCode.OK


# -- cache -----------------------------------------------------------------------------------------

def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def cmd_cache(args: argparse.Namespace) -> int:
    from .compile_cache import cache_usage, clear_caches, default_cache_root

    if args.action == "info":
        root = default_cache_root()
        source = "GLRMASK_CACHE_DIR" if os.environ.get("GLRMASK_CACHE_DIR") else "default; set GLRMASK_CACHE_DIR to move it"
        print(f"cache root    {root} ({source})")
        for u in cache_usage():
            print(f"{u.name:<13} {u.files} file{'s' if u.files != 1 else ''}, {_mb(u.bytes)}  {u.directory}")
        return ExitCode.OK
    names = [n for n, on in (("compiled", args.compiled), ("tries", args.tries)) if on] or None
    removed = clear_caches(names)
    for u in removed:
        print(f"removed {u.files} {u.name} file{'s' if u.files != 1 else ''} ({_mb(u.bytes)}) from {u.directory}")
    return ExitCode.OK


# -- demo ------------------------------------------------------------------------------------------

DEMO_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 16},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "languages": {"type": "array", "items": {"enum": ["en", "fr", "de", "ja"]}, "maxItems": 3},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
DEMO_VALID = '{"name": "Ada", "age": 36, "languages": ["en", "fr"]}'
DEMO_INVALID = '{"name": "Ada", "age": 360}'

#: Further steps `demo` suggests; a command registered later (``glrmask generate``, constrained
#: generation with a model) adds its own line here when it is available.
DEMO_NEXT = [
    "glrmask check --json-schema schema.json --text '{\"name\": \"Ada\", \"age\": 36}'",
    "glrmask check grammars/json.lark --text '{\"a\": 01}'   # any Lark/GBNF grammar, same checks",
    "glrmask sample grammars/sql.lark -n 3                  # samples of a SQL subset",
    "glrmask compile grammars/sql.lark -o sql.glrm          # compile once, load in milliseconds",
]


def cmd_demo(args: argparse.Namespace) -> int:
    """A tour in one command: a JSON Schema compiled for GPT-2, a valid and an invalid document
    checked token by token, and samples that are valid by construction."""
    from .api import compile_json_schema

    out = sys.stdout
    vocab = load_vocab(None)
    out.write(f"glrmask: exact next-token masks for constrained decoding. Tokenizer: built-in GPT-2 "
              f"({vocab.size:,} tokens).\n\n")
    out.write(f"1. The JSON Schema:\n   {json.dumps(DEMO_SCHEMA)}\n")
    t0 = time.perf_counter()
    mask = compile_json_schema(DEMO_SCHEMA, vocab, mode="dynamic")
    out.write(f"   becomes a grammar; masks over all {vocab.size:,} tokens are ready in "
              f"{time.perf_counter() - t0:.2f} s (computed as needed; `glrmask compile` builds them ahead).\n\n")
    out.write("2. Check documents token by token, as a model would emit them:\n")
    for doc in (DEMO_VALID, DEMO_INVALID):
        code, lines = check_text(vocab, mask, doc)
        out.write(f"   {doc}\n")
        for line in lines[:3]:
            out.write(f"     {line}\n")
    prefix = '{"name": "Ada", "age": 12'
    state = mask.start()
    state.commit_bytes(prefix.encode())
    ids = allowed_ids(mask.get_mask(state), vocab.n_logits)
    shown = ", ".join(repr(vocab.token_bytes(int(t)).decode("utf-8", "replace")) for t in ids[:8])
    out.write(f"   After {prefix} the mask allows {len(ids)} of {vocab.size:,} tokens: {shown}"
              f"{', …' if len(ids) > 8 else ''}\n   (\"age\" is at most 120: 120 is the only way on with a digit.)\n\n")
    out.write("3. Sample with random choices among the allowed tokens (no model: every token is random,\n"
              "   yet every document is valid for the schema):\n")
    rng = np.random.default_rng(args.seed)
    chooser = TokenChooser(mask, rng, 80)
    shown = 0
    for _ in range(args.n * 3):
        text = _sample_one(mask, chooser, rng, limit=200)
        if text is None:
            continue
        out.write("   " + text.replace("\n", "\n   ") + "\n")  # newlines only occur between tokens
        out.flush()
        shown += 1
        if shown == args.n:
            break
    out.write("\nNext:\n")
    next_steps = list(DEMO_NEXT)
    if importlib.util.find_spec("glrmask.serve.commands") is not None:
        next_steps.append("glrmask generate --json-schema SCHEMA --prompt 'Invent a character as JSON.'"
                          "   # a real model under the same masks")
    for line in next_steps:
        out.write(f"   {line}\n")
    return ExitCode.OK


def _sample_one(mask, chooser: TokenChooser, rng: np.random.Generator, limit: int) -> Optional[str]:
    """One finished sample's text, or None when it did not finish within ``limit`` tokens."""
    pieces: list[bytes] = []
    finished, _n = sample_tokens(mask, chooser, rng, limit, lambda tok: pieces.append(mask.vocab.token_bytes(tok)))
    return b"".join(pieces).decode("utf-8", "replace") if finished else None


# -- the parser ------------------------------------------------------------------------------------

def _sub(sub, name: str, help_: str, examples: str, description: Optional[str] = None) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=help_, description=description or help_,
                          epilog="examples:\n" + examples + "\n\n" + EXIT_CODES_HELP,
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    p = argparse.ArgumentParser(
        prog="glrmask",
        description="Exact next-token masks for grammar-constrained LLM decoding: compile a grammar or a "
                    "JSON Schema for a tokenizer, check texts against it, sample under it.",
        epilog=EXAMPLES + "\n" + EXIT_CODES_HELP + "\n\n" + CACHE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"glrmask {__version__}")
    p.add_argument("-q", "--quiet", action="store_true", default=False,
                   help="print only results and errors (no progress, no warning count)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    d = _sub(sub, "demo", "show what glrmask does: check and sample JSON under a JSON Schema (built-in GPT-2)",
             "  glrmask demo\n  glrmask demo -n 5 --seed 7")
    d.add_argument("-n", type=int, default=3, help="number of samples (default 3)")
    d.add_argument("--seed", type=int, default=1)
    d.set_defaults(func=cmd_demo)

    c = _sub(sub, "check", "replay a text through the masks; report the first byte they refuse",
             "  glrmask check grammars/json.lark --text '{\"a\": [1, 2]}'\n"
             "  glrmask check grammars/json.lark --text '{\"a\": 01}'     # rejected: byte 7\n"
             "  glrmask check --json-schema schema.json --file doc.json\n"
             "  glrmask check sql.glrm --text 'SELECT a FROM t'")
    _add_source_args(c)
    g = c.add_mutually_exclusive_group(required=True)
    g.add_argument("--text", help="the text to check")
    g.add_argument("--file", help="a UTF-8 file holding the text to check")
    c.add_argument("--mode", default=None, choices=["static", "dynamic", "auto"],
                   help="how masks are computed, same masks either way (default: static for a grammar, "
                        "auto for a JSON Schema)")
    c.set_defaults(func=cmd_check)

    s = _sub(sub, "sample", "print random texts the masks allow (numbered; a debugging aid, not a model)",
             "  glrmask sample grammars/json.lark -n 3 --seed 1\n"
             "  glrmask sample grammars/sql.lark -n 5 --max-tokens 40\n"
             "  glrmask sample --json-schema schema.json -n 3\n"
             "  glrmask sample json.glrm -n 3 --tokenizer path/to/tokenizer.json",
             description="Print random texts the masks allow, numbered and separated. Tokens are drawn among "
                         "the allowed ones (uniform over their first bytes); from half of --max-tokens on, "
                         "the draw looks one token ahead and prefers to finish. A sample that does not finish "
                         "is marked INCOMPLETE and makes the exit code 3.")
    _add_source_args(s)
    s.add_argument("-n", type=int, default=3, help="number of samples (default 3)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--max-tokens", type=int, default=60,
                   help="length to aim for: from half of it on, sampling steers towards an end (default 60)")
    s.add_argument("--finish-factor", type=int, default=4,
                   help="after --max-tokens, steer for at most this many times as many tokens more, then give "
                        "up and report the sample INCOMPLETE (default 4; 0: stop at --max-tokens)")
    s.add_argument("--mode", default=None, choices=["static", "dynamic", "auto"],
                   help="how masks are computed, same masks either way (default: static for a grammar, "
                        "auto for a JSON Schema)")
    s.set_defaults(func=cmd_sample)

    k = _sub(sub, "compile", "compile a grammar for a tokenizer into an artifact (.glrm)",
             "  glrmask compile grammars/json.lark -o json.glrm\n"
             "  glrmask compile --json-schema schema.json --tokenizer tok.json -o schema.glrm\n"
             "  glrmask compile grammars/sql.lark --no-cache         # compile even if cached")
    _add_source_args(k)
    k.add_argument("-o", "--output", default=None, help="artifact path (default: GRAMMAR's stem + .glrm)")
    k.set_defaults(func=cmd_compile)

    i = _sub(sub, "inspect", "describe a compiled artifact: tokenizer, grammar, stages (no tokenizer needed)",
             "  glrmask inspect json.glrm\n  glrmask inspect json.glrm --arrays --warnings")
    i.add_argument("artifact")
    i.add_argument("--arrays", action="store_true", help="list every stored array")
    i.add_argument("--tokenizer", default=None,
                   help="the tokenizer the artifact was compiled for, to name it and its end tokens when the "
                        "artifact does not record them (the built-in GPT-2 is recognized without it)")
    _add_output_args(i)
    i.set_defaults(func=cmd_inspect)

    ca = _sub(sub, "cache", "show or empty glrmask's caches (compiled grammars, vocabulary tries)",
              "  glrmask cache info\n  glrmask cache clear\n  glrmask cache clear --compiled",
              description="Show or empty glrmask's caches.\n\n" + CACHE_HELP)
    ca.add_argument("action", choices=["info", "clear"])
    ca.add_argument("--compiled", action="store_true", help="clear: only compiled grammars")
    ca.add_argument("--tries", action="store_true", help="clear: only vocabulary tries")
    ca.set_defaults(func=cmd_cache)

    _register_serving_commands(sub)
    return p


def _register_serving_commands(sub) -> None:
    """``generate`` and ``serve`` come from :mod:`glrmask.serve.commands` when it is installed.

    Only that module's own absence is tolerated; an error inside it (its own broken import
    included) is a bug that must show. Its optional dependencies (torch, transformers, the HTTP
    server) are imported by its commands when they run, so their absence fails there, with its
    message, not here."""
    try:
        commands = importlib.import_module("glrmask.serve.commands")
    except ModuleNotFoundError as e:
        if e.name in ("glrmask.serve", "glrmask.serve.commands"):
            return
        raise
    commands.register(sub)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command in ("check", "sample", "compile"):
        _check_source_args(parser, args)
    try:
        return int(args.func(args))
    except GlrmaskError as e:
        print(f"error: {e}", file=sys.stderr)
        return ExitCode.ERROR
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `glrmask sample … | head`: the reader has all it wants
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush does not fail again
        return ExitCode.OK


if __name__ == "__main__":
    sys.exit(main())
