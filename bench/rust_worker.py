"""GLRMask-Rust (PyPI ``glrmask==0.5.0``) behind a pipe, for the benchmarks in this folder.

Why a separate process: the Rust package imports as ``glrmask``, the same name as this repository's
package, so it runs in its own virtual environment (``bench/README.md``) with this file as its
main program; ``bench/peers.py`` (``RustEngine``) starts it and speaks to it.

Protocol: one JSON object per line on stdin, one JSON object per line on stdout (``"ok"`` true or
false with ``"error"``); anything else the process prints goes to stderr. Arrays travel as base64
(``peers.pack``). Requests:

* ``hello`` {core, vocab}: pin to ``core``, build the vocabulary from the ``.npz`` of token bytes
  (``concat``, ``offsets``: this repository's ``Vocab`` tables, so both glrmasks see the same
  bytes per id); answers the package version.
* ``compile`` {kind: "lark"|"json_schema", source}: compile, then start a state and fill its first
  mask; answers a handle and ``compile_ns`` / ``first_mask_ns``.
* ``replay`` {handle, docs}: ``peers.time_replays`` over fresh states — timing happens here, per
  token, with ``time.perf_counter_ns``; only the samples cross the pipe.
* ``save_load`` {handle, repeats}: artifact size, ``Constraint.load`` times, first mask after load.
* ``free`` {handle}, ``quit``.

The API used is the package's documented one: ``Vocab.from_id_to_bytes``, ``Grammar.from_lark`` /
``Grammar.from_json_schema``, ``Grammar.compile(vocab)``, ``Constraint.start()``,
``ConstraintState.fill_mask(int32 buffer)``, ``commit_token``, ``is_accepting``,
``Constraint.save`` / ``Constraint.load(data, vocab)``.
"""
from __future__ import annotations

import functools
import json
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peers import Request, pin_to_core, time_replays, unpack_docs  # noqa: E402

import glrmask  # noqa: E402  (GLRMask-Rust, from this process's virtual environment)


class Worker:
    def __init__(self) -> None:
        self.vocab = None
        self.constraints: dict[int, object] = {}
        self.next_handle = 1

    # -- requests ---------------------------------------------------------------------------------
    def hello(self, core, vocab: str) -> dict:
        if not all(hasattr(glrmask, n) for n in ("Grammar", "Constraint", "Vocab")):
            return {"ok": False, "error": f"the glrmask at {glrmask.__file__} is not GLRMask-Rust "
                                          "(no Grammar/Constraint): point GLRMASK_RUST_PYTHON at its own venv"}
        pinned = pin_to_core(core) if core is not None else None
        z = np.load(vocab)
        concat, offsets = z["concat"].tobytes(), z["offsets"].tolist()
        id_to_bytes = {i: concat[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)
                       if offsets[i + 1] > offsets[i]}
        self.vocab = glrmask.Vocab.from_id_to_bytes(id_to_bytes)
        return {"version": glrmask.__version__, "pid": os.getpid(), "core": pinned,
                "python": sys.version.split()[0], "module": glrmask.__file__, "tokens_with_bytes": len(id_to_bytes)}

    def compile(self, kind: str, source) -> dict:
        t0 = time.perf_counter_ns()
        try:
            grammar = (glrmask.Grammar.from_lark(source) if kind == "lark"
                       else glrmask.Grammar.from_json_schema(source))
            constraint = grammar.compile(self.vocab)
        except Exception as e:  # the package raises ValueError for grammars and schemas it refuses
            return {"ok": False, "error": f"{type(e).__name__}: {str(e)[:300]}"}
        t1 = time.perf_counter_ns()
        self.request(constraint).fill()
        t2 = time.perf_counter_ns()
        handle = self.next_handle
        self.next_handle += 1
        self.constraints[handle] = constraint
        return {"handle": handle, "compile_ns": t1 - t0, "first_mask_ns": t2 - t1,
                "mask_len": constraint.mask_len()}

    @staticmethod
    def request(constraint) -> Request:
        state = constraint.start()
        buf = np.zeros(constraint.mask_len(), np.int32)
        return Request(functools.partial(state.fill_mask, buf), state.commit_token, buf.view(np.uint32),
                       state.is_accepting)

    def replay(self, handle: int, docs: dict) -> dict:
        constraint = self.constraints[handle]
        result = time_replays(functools.partial(self.request, constraint), unpack_docs(docs))
        return {"result": result.to_wire()}

    def save_load(self, handle: int, repeats: int) -> dict:
        data = self.constraints[handle].save()
        loads = []
        first_mask_ns = None
        for _ in range(max(1, repeats)):
            t0 = time.perf_counter_ns()
            loaded = glrmask.Constraint.load(data, self.vocab)
            t1 = time.perf_counter_ns()
            loads.append(t1 - t0)
            if first_mask_ns is None:
                req = self.request(loaded)
                t2 = time.perf_counter_ns()
                req.fill()
                first_mask_ns = time.perf_counter_ns() - t2
        return {"bytes": len(data), "load_ns": loads, "first_mask_ns": first_mask_ns}

    def free(self, handle: int) -> dict:
        self.constraints.pop(handle, None)
        return {}

    # -- loop -------------------------------------------------------------------------------------
    def serve(self, inp, out) -> None:
        for line in inp:
            req = json.loads(line)
            op = req.pop("op")
            if op == "quit":
                return
            try:
                answer = getattr(self, op)(**req)
                answer.setdefault("ok", True)
            except Exception as e:  # report, keep serving: one bad request must not end the run
                traceback.print_exc(file=sys.stderr)
                answer = {"ok": False, "error": f"{type(e).__name__}: {e}"}
            out.write(json.dumps(answer) + "\n")
            out.flush()


def main() -> None:
    protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1 << 20)
    sys.stdout = sys.stderr  # nothing but answers on the protocol stream
    Worker().serve(sys.stdin, protocol_out)


if __name__ == "__main__":
    main()
