"""Specification of glrmask.integrations.vllm (and the engine-agnostic glrmask.integrations.serving).

vLLM is not a test dependency (it is large and GPU-bound), so its calls are emulated faithfully:
the legacy runner's ``update_state(BatchUpdate)`` ledger (removed, then added with a live
output-token list, then moved / swapped) followed by one ``apply(logits)`` per step, and Model
Runner V2's ``add_request(slot, params)`` plus ``apply(logits, ctx)`` with a row -> slot mapping
and the token history in ``req_states``. Where vLLM is importable, its own ``BatchUpdate`` and
``MoveDirectionality`` objects drive the processor too. Outputs are judged by lark and jsonschema.
"""
from __future__ import annotations

import enum
import json
import threading
from dataclasses import dataclass, field
from types import SimpleNamespace

import jsonschema
import lark
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import glrmask  # noqa: E402
from glrmask.integrations import serving  # noqa: E402
from glrmask.integrations.serving import CompileCache, GrammarSpec  # noqa: E402
from glrmask.integrations.vllm import BatchUpdateLogic, SlotLogic, validate_sampling_params  # noqa: E402

EOS = 50256
SCHEMA = {
    "type": "object",
    "properties": {"name": {"enum": ["ab", "cd"]}, "ok": {"type": "boolean"}},
    "required": ["name", "ok"],
    "additionalProperties": False,
}
LARK = 'start: "[" NUM ("," NUM)~0..2 "]"\nNUM: /[0-9]{1,2}/\n'


class MoveDirectionality(enum.Enum):  # vllm.v1.sample.logits_processor.MoveDirectionality
    UNIDIRECTIONAL = enum.auto()
    SWAP = enum.auto()


@dataclass(frozen=True)
class BatchUpdate:  # vllm.v1.sample.logits_processor.BatchUpdate
    batch_size: int
    removed: list = field(default_factory=list)
    added: list = field(default_factory=list)
    moved: list = field(default_factory=list)


def params(**extra):
    return SimpleNamespace(extra_args=extra or None)


def json_params():
    return params(glrmask_json_schema=SCHEMA)


def lark_params():
    return params(glrmask_grammar=LARK)


@pytest.fixture(scope="module")
def vocab(gpt2):
    return gpt2


@pytest.fixture()
def cache(vocab):
    c = CompileCache(vocab, mode="dynamic")
    yield c
    c.close()


def allowed_after(vocab, spec: GrammarSpec, tokens) -> set[int]:
    mask = spec.compile(vocab, mode="dynamic")
    state = mask.start()
    for t in tokens:
        assert state.commit(t)
    return set(glrmask.bitmask.ids_from_mask(mask.get_mask(state)).tolist())


def finite(row) -> set[int]:
    return set(torch.isfinite(row).nonzero().flatten().tolist())


JSON_SPEC = GrammarSpec.from_args({"glrmask_json_schema": SCHEMA})
LARK_SPEC = GrammarSpec.from_args({"glrmask_grammar": LARK})


def valid(spec: GrammarSpec, vocab, tokens: list[int]) -> bool:
    assert tokens and tokens[-1] == EOS, vocab.decode_bytes(tokens)
    text = vocab.decode_bytes(tokens[:-1]).decode()
    if spec.kind == "json_schema":
        jsonschema.validate(json.loads(text), SCHEMA)
    else:
        lark.Lark(LARK).parse(text)
    return True


# ---- grammar specs -------------------------------------------------------------------------------


def test_no_glrmask_arguments_mean_no_constraint():
    assert GrammarSpec.from_args(None) is None
    assert GrammarSpec.from_args({"other": 1}) is None


def test_equal_schemas_have_one_canonical_text():
    a = GrammarSpec.from_args({"glrmask_json_schema": {"type": "object", "required": []}})
    b = GrammarSpec.from_args({"glrmask_json_schema": '{"required": [], "type": "object"}'})
    assert a == b


@pytest.mark.parametrize(
    "extra",
    [
        {"glrmask_grammar": 'start: "a"', "glrmask_json_schema": {}},
        {"glrmask_json_schema": "{not json"},
        {"glrmask_json_schema": [1, 2]},
        {"glrmask_grammar": ""},
        {"glrmask_grammar": 'start: "a"', "glrmask_format": "yaml"},
        {"glrmask_grammar": "start: undefined_rule"},
        {"glrmask_json_schema": {"type": "no-such-type"}},
    ],
)
def test_admission_rejects_a_malformed_constraint_with_value_error(extra):
    with pytest.raises(ValueError, match="glrmask"):
        validate_sampling_params(params(**extra))


def test_admission_accepts_valid_constraints_and_unconstrained_requests():
    validate_sampling_params(json_params())
    validate_sampling_params(lark_params())
    validate_sampling_params(params())


# ---- the compile cache ---------------------------------------------------------------------------


def test_the_same_spec_is_compiled_once(cache):
    assert cache.get(JSON_SPEC) is cache.get(GrammarSpec.from_args({"glrmask_json_schema": dict(SCHEMA)}))
    assert len(cache) == 1


def test_the_cache_keeps_only_the_most_recently_used(vocab):
    cache = CompileCache(vocab, max_entries=2, mode="dynamic")
    specs = [GrammarSpec.from_args({"glrmask_grammar": f'start: "{c}"'}) for c in "abc"]
    cache.get(specs[0])
    cache.get(specs[1])
    cache.get(specs[0])  # most recent now
    cache.get(specs[2])
    assert specs[0] in cache and specs[2] in cache and specs[1] not in cache
    cache.close()


def test_compiles_run_in_worker_threads(cache, monkeypatch):
    seen = []
    original = GrammarSpec.compile

    def spy(self, vocab, mode="auto"):
        seen.append(threading.current_thread().name)
        return original(self, vocab, mode)

    monkeypatch.setattr(GrammarSpec, "compile", spy)
    cache.get(LARK_SPEC).result(timeout=60)
    assert seen and seen[0].startswith("glrmask-compile") and seen[0] != threading.current_thread().name


def test_a_failed_compile_is_not_cached(cache, monkeypatch):
    def fail(self, vocab, mode="auto"):
        raise glrmask.GrammarTooComplex("budget")

    monkeypatch.setattr(GrammarSpec, "compile", fail)
    future = cache.get(LARK_SPEC)
    with pytest.raises(glrmask.GrammarTooComplex):
        future.result(timeout=60)
    assert LARK_SPEC not in cache


# ---- legacy runner: BatchUpdate ledger -----------------------------------------------------------


def greedy_step(proc: BatchUpdateLogic, outputs: list[list[int]], rng) -> torch.Tensor:
    """One engine step: apply, then the engine appends each row's greedy token to its live list."""
    logits = torch.from_numpy(rng.standard_normal((len(outputs), proc.vocab.n_logits)).astype(np.float32))
    logits[:, EOS] += 2.0  # end as soon as the grammar allows
    proc.apply(logits)
    for row, out in enumerate(outputs):
        if not out or out[-1] != EOS:
            out.append(int(torch.argmax(logits[row])))
    return logits


def test_added_requests_are_masked_from_their_start_state(vocab, cache):
    proc = BatchUpdateLogic(vocab, cache)
    outs = [[], [], []]
    proc.update_state(BatchUpdate(3, added=[(0, json_params(), [1, 2], outs[0]), (1, params(), [3], outs[1]),
                                            (2, lark_params(), [4], outs[2])]))
    logits = torch.zeros(3, vocab.n_logits)
    proc.apply(logits)
    assert finite(logits[0]) == allowed_after(vocab, JSON_SPEC, [])
    assert torch.isfinite(logits[1]).all()
    assert finite(logits[2]) == allowed_after(vocab, LARK_SPEC, [])


def test_new_output_tokens_are_read_from_the_live_list(vocab, cache):
    proc = BatchUpdateLogic(vocab, cache)
    out: list[int] = []
    proc.update_state(BatchUpdate(1, added=[(0, lark_params(), [9], out)]))
    proc.apply(torch.zeros(1, vocab.n_logits))
    out.extend(vocab.encode("[1"))  # the engine appended (here: two steps at once)
    logits = torch.zeros(1, vocab.n_logits)
    proc.update_state(None)
    proc.apply(logits)
    assert finite(logits[0]) == allowed_after(vocab, LARK_SPEC, out)


def test_removed_moved_and_swapped_requests_keep_their_states(vocab, cache):
    proc = BatchUpdateLogic(vocab, cache)
    a, b, c = vocab.encode("[1"), [], vocab.encode('{"name":')
    proc.update_state(BatchUpdate(3, added=[(0, lark_params(), None, a), (1, params(), None, b),
                                            (2, json_params(), None, c)]))
    proc.apply(torch.zeros(3, vocab.n_logits))
    # request 0 finishes; the batch is condensed: 2 -> 0; then rows 0 and 1 swap
    proc.update_state(BatchUpdate(2, removed=[0], moved=[(2, 0, MoveDirectionality.UNIDIRECTIONAL)]))
    proc.update_state(BatchUpdate(2, moved=[(0, 1, MoveDirectionality.SWAP)]))
    logits = torch.zeros(2, vocab.n_logits)
    proc.apply(logits)
    assert torch.isfinite(logits[0]).all()  # the unconstrained request
    assert finite(logits[1]) == allowed_after(vocab, JSON_SPEC, c)


def test_an_added_request_replaces_the_previous_occupant_of_its_row(vocab, cache):
    proc = BatchUpdateLogic(vocab, cache)
    proc.update_state(BatchUpdate(1, added=[(0, lark_params(), None, vocab.encode("[1"))]))
    proc.apply(torch.zeros(1, vocab.n_logits))
    proc.update_state(BatchUpdate(1, added=[(0, params(), None, [])]))
    logits = torch.zeros(1, vocab.n_logits)
    proc.apply(logits)
    assert torch.isfinite(logits).all()


def test_a_decode_loop_with_joins_and_leaves_gives_valid_outputs(vocab, cache):
    rng = np.random.default_rng(3)
    proc = BatchUpdateLogic(vocab, cache)
    outs = [[], []]
    specs = {0: LARK_SPEC, 1: JSON_SPEC}
    proc.update_state(BatchUpdate(2, added=[(0, lark_params(), None, outs[0]), (1, json_params(), None, outs[1])]))
    finished = {}
    late: list[int] = []
    for step in range(60):
        if step == 3:  # a request joins in a new row
            outs.append(late)
            specs[2] = LARK_SPEC
            proc.update_state(BatchUpdate(3, added=[(2, lark_params(), None, late)]))
        greedy_step(proc, outs, rng)
        for row, out in enumerate(outs):
            if out and out[-1] == EOS and row not in finished:
                finished[row] = list(out)
        if len(finished) == 3:
            break
    assert sorted(finished) == [0, 1, 2]
    assert all(valid(specs[row], vocab, toks) for row, toks in finished.items())


def test_a_constraint_that_fails_to_compile_ends_its_request(vocab, cache, monkeypatch):
    def fail(self, vocab, mode="auto"):
        raise glrmask.GrammarTooComplex("budget")

    monkeypatch.setattr(GrammarSpec, "compile", fail)
    proc = BatchUpdateLogic(vocab, cache)
    proc.update_state(BatchUpdate(1, added=[(0, lark_params(), None, [])]))
    logits = torch.zeros(1, vocab.n_logits)
    proc.apply(logits)
    assert finite(logits[0]) == set(vocab.eos_token_ids)


def test_the_processor_changes_greedy_choices(vocab, cache):
    assert BatchUpdateLogic(vocab, cache).is_argmax_invariant() is False


# ---- Model Runner V2: slots, row -> slot mapping, token history ----------------------------------


class FakeRequestStates:
    """The fields of vLLM's LogitsProcRequestState that the processor reads."""

    def __init__(self, slots: int, max_len: int):
        self.all_token_ids = SimpleNamespace(gpu=torch.zeros(slots, max_len, dtype=torch.int32))
        self.prompt_len = SimpleNamespace(np=np.zeros(slots, dtype=np.int32))
        self.lengths = np.zeros(slots, dtype=np.int64)

    def start(self, slot: int, prompt: list[int]) -> None:
        self.prompt_len.np[slot] = len(prompt)
        self.all_token_ids.gpu[slot, : len(prompt)] = torch.tensor(prompt)
        self.lengths[slot] = len(prompt)

    def append(self, slot: int, token: int) -> None:
        self.all_token_ids.gpu[slot, self.lengths[slot]] = token
        self.lengths[slot] += 1

    def ctx(self, order: list[int]) -> SimpleNamespace:
        """This step's layout: batch position i holds slot order[i]."""
        return SimpleNamespace(idx_mapping_np=np.array(order, dtype=np.int32),
                               seq_lens_upper_bound_np=self.lengths[order].astype(np.int32))


def test_slots_are_masked_by_the_row_they_occupy_this_step(vocab, cache):
    states = FakeRequestStates(4, 64)
    proc = SlotLogic(vocab, states, cache)
    assert proc.add_request(3, lark_params()) is True
    assert proc.add_request(1, params()) is False
    states.start(3, [5, 6])
    states.start(1, [7])
    for t in vocab.encode("[4"):
        states.append(3, t)
    logits = torch.zeros(2, vocab.n_logits)
    proc.apply(logits, states.ctx([1, 3]))
    assert torch.isfinite(logits[0]).all()
    assert finite(logits[1]) == allowed_after(vocab, LARK_SPEC, vocab.encode("[4"))


def test_a_recycled_slot_starts_from_its_new_request(vocab, cache):
    states = FakeRequestStates(2, 64)
    proc = SlotLogic(vocab, states, cache)
    proc.add_request(0, lark_params())
    states.start(0, [1])
    states.append(0, vocab.encode("[")[0])
    proc.apply(torch.zeros(1, vocab.n_logits), states.ctx([0]))
    proc.add_request(0, json_params())
    states.start(0, [2, 3, 4])
    logits = torch.zeros(1, vocab.n_logits)
    proc.apply(logits, states.ctx([0]))
    assert finite(logits[0]) == allowed_after(vocab, JSON_SPEC, [])


def test_a_request_still_prefilling_is_left_alone(vocab, cache):
    states = FakeRequestStates(1, 64)
    proc = SlotLogic(vocab, states, cache)
    proc.add_request(0, lark_params())
    states.start(0, [1, 2, 3, 4])
    ctx = states.ctx([0])
    ctx.seq_lens_upper_bound_np[:] = 2  # a chunk of the prompt
    logits = torch.zeros(1, vocab.n_logits)
    proc.apply(logits, ctx)
    assert torch.isfinite(logits).all()


def test_a_v2_decode_loop_with_reordered_rows_gives_valid_outputs(vocab, cache):
    rng = np.random.default_rng(5)
    states = FakeRequestStates(3, 128)
    proc = SlotLogic(vocab, states, cache)
    specs = {0: JSON_SPEC, 2: LARK_SPEC}
    proc.add_request(0, json_params())
    proc.add_request(2, lark_params())
    states.start(0, [11, 12])
    states.start(2, [13])
    done: dict[int, list[int]] = {}
    for step in range(60):
        order = [s for s in (0, 2) if s not in done]
        if not order:
            break
        if step % 2:
            order.reverse()
        logits = torch.from_numpy(rng.standard_normal((len(order), vocab.n_logits)).astype(np.float32))
        logits[:, EOS] += 2.0
        proc.apply(logits, states.ctx(order))
        for row, slot in enumerate(order):
            token = int(torch.argmax(logits[row]))
            states.append(slot, token)
            if token == EOS:
                n0 = states.prompt_len.np[slot]
                done[slot] = states.all_token_ids.gpu[slot, n0: states.lengths[slot]].tolist()
    assert sorted(done) == [0, 2]
    assert all(valid(specs[s], vocab, toks) for s, toks in done.items())


def test_several_rows_per_request_are_refused(vocab, cache):
    states = FakeRequestStates(1, 8)
    proc = SlotLogic(vocab, states, cache)
    proc.add_request(0, lark_params())
    with pytest.raises(glrmask.GlrmaskError, match="speculative"):
        proc.apply(torch.zeros(2, vocab.n_logits), states.ctx([0]))


# ---- vLLM's own objects, where vLLM is installed -------------------------------------------------


def _vllm_available() -> bool:
    try:
        import vllm.v1.sample.logits_processor  # noqa: F401
    except Exception:  # noqa: BLE001 - absent, or present without a usable build
        return False
    return True


@pytest.mark.skipif(not _vllm_available(), reason="vLLM is not installed")
def test_vllm_batch_update_objects_drive_the_processor(vocab, cache):
    from vllm import SamplingParams
    from vllm.v1.sample.logits_processor import BatchUpdate as VBatchUpdate
    from vllm.v1.sample.logits_processor import MoveDirectionality as VMove

    proc = BatchUpdateLogic(vocab, cache)
    out = vocab.encode("[1")
    sp = SamplingParams(extra_args={"glrmask_grammar": LARK})
    proc.update_state(VBatchUpdate(batch_size=2, removed=[], moved=[],
                                   added=[(0, sp, [1], out), (1, SamplingParams(), [2], [])]))
    proc.update_state(VBatchUpdate(batch_size=2, removed=[], added=[], moved=[(0, 1, VMove.SWAP)]))
    logits = torch.zeros(2, vocab.n_logits)
    proc.apply(logits)
    assert torch.isfinite(logits[0]).all()
    assert finite(logits[1]) == allowed_after(vocab, LARK_SPEC, out)


@pytest.mark.skipif(not _vllm_available(), reason="vLLM is not installed")
def test_the_vllm_classes_subclass_vllms_interfaces():
    from glrmask.integrations import vllm as integration

    names = [n for n in ("GlrmaskLogitsProcessor", "GlrmaskV1LogitsProcessor") if hasattr(integration, n)]
    assert names, "neither vLLM interface was found"


def test_serving_module_names_its_request_arguments():
    assert serving.EXTRA_ARG_JSON_SCHEMA == "glrmask_json_schema"
    assert serving.EXTRA_ARG_GRAMMAR == "glrmask_grammar"
