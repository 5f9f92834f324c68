"""Specification of the artifact container (glrmask.artifact): round trips and refused loads."""
from __future__ import annotations

import json
import random
import struct
import sys
import unicodedata

import numpy as np
import pytest

from glrmask.artifact import FORMAT_VERSION, MAGIC, Artifact, read_artifact, write_artifact
from glrmask.errors import ArtifactError, GlrmaskError

FP = "ab" * 32


def sample_arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "u8": rng.integers(0, 256, 1000, dtype=np.uint8),
        "i32_2d": rng.integers(-(2**31), 2**31 - 1, (17, 5), dtype=np.int32),
        "u64": rng.integers(0, 2**63, 33, dtype=np.uint64) * np.uint64(2),
        "i64_3d": rng.integers(-(2**62), 2**62, (2, 3, 4), dtype=np.int64),
        "f32": rng.random(7, dtype=np.float32),
        "f64": np.array([0.0, -1.5, np.inf, np.nan]),
        "bool": rng.random(13) < 0.5,
        "i16_big_endian": np.arange(-5, 5, dtype=">i2"),
        "fortran": np.asfortranarray(np.arange(12, dtype=np.int32).reshape(3, 4)),
        "strided": np.arange(20, dtype=np.int32)[::3],
        "scalar": np.array(42, dtype=np.int64),
        "empty": np.zeros(0, dtype=np.int32),
        "empty_2d": np.zeros((0, 4), dtype=np.uint64),
        "fixed_bytes": np.array([b"ab", b"", b"xyz"]),
    }


@pytest.fixture
def artifact_path(tmp_path):
    path = tmp_path / "a.glrmask"
    write_artifact(path, kind="mask", meta={"vocab_fingerprint": FP, "grammar_hash": "g1",
                                            "options": {"mode": "static"}}, arrays=sample_arrays())
    return path


@pytest.mark.parametrize("mmap", [True, False])
def test_round_trip_preserves_values_dtypes_and_shapes(artifact_path, mmap):
    art = read_artifact(artifact_path, kind="mask", expect_fingerprint=FP, mmap=mmap)
    for name, original in sample_arrays().items():
        loaded = art.arrays[name]
        assert loaded.shape == original.shape, name
        assert loaded.dtype.newbyteorder("=") == original.dtype.newbyteorder("="), name
        np.testing.assert_array_equal(loaded, original, err_msg=name)
    assert set(art.arrays) == set(sample_arrays())


def test_round_trip_preserves_meta_and_records_environment(artifact_path):
    art = read_artifact(artifact_path, kind="mask")
    assert isinstance(art, Artifact)
    assert art.meta == {"vocab_fingerprint": FP, "grammar_hash": "g1", "options": {"mode": "static"}}
    assert art.kind == "mask"
    assert art.header["format_version"] == FORMAT_VERSION
    assert art.python_version == "%d.%d.%d" % sys.version_info[:3]
    assert art.unicodedata_version == unicodedata.unidata_version
    assert art.glrmask_version


def test_mapped_arrays_are_read_only(artifact_path):
    art = read_artifact(artifact_path, kind="mask")
    with pytest.raises(ValueError):
        art.arrays["u8"][0] = 1


def test_arrays_sit_at_64_byte_aligned_offsets(artifact_path):
    art = read_artifact(artifact_path, kind="mask")
    for entry in art.header["arrays"].values():
        assert entry["offset"] % 64 == 0


def test_file_starts_with_magic_version_and_header_length(artifact_path):
    data = artifact_path.read_bytes()
    magic, version, header_len = struct.unpack_from("<8sII", data)
    assert magic == MAGIC == b"GLRMASK\0" and version == FORMAT_VERSION
    header = json.loads(data[16:16 + header_len])
    assert header["kind"] == "mask" and header["meta"]["grammar_hash"] == "g1"


def test_write_leaves_no_temporary_files(tmp_path):
    write_artifact(tmp_path / "a.glrmask", kind="k", meta={}, arrays={"x": np.arange(3)})
    write_artifact(tmp_path / "a.glrmask", kind="k", meta={}, arrays={"x": np.arange(4)})
    assert [p.name for p in tmp_path.iterdir()] == ["a.glrmask"]
    assert read_artifact(tmp_path / "a.glrmask", kind="k").arrays["x"].tolist() == [0, 1, 2, 3]


def test_artifact_with_no_arrays_round_trips(tmp_path):
    write_artifact(tmp_path / "e", kind="k", meta={"n": 1}, arrays={})
    art = read_artifact(tmp_path / "e", kind="k")
    assert art.meta == {"n": 1} and dict(art.arrays) == {}


# -------------------------------------------------------------------------------------------------
# refusals


def test_errors_are_glrmask_errors():
    assert issubclass(ArtifactError, GlrmaskError)


def test_object_arrays_are_refused_at_write(tmp_path):
    with pytest.raises(ArtifactError, match="pickl"):
        write_artifact(tmp_path / "o", kind="k", meta={}, arrays={"o": np.array([{"a": 1}], dtype=object)})
    assert not list(tmp_path.iterdir())


def test_structured_arrays_are_refused_at_write(tmp_path):
    rec = np.zeros(2, dtype=[("a", np.int32), ("b", np.float64)])
    with pytest.raises(ArtifactError):
        write_artifact(tmp_path / "s", kind="k", meta={}, arrays={"r": rec})


def test_meta_that_is_not_json_is_refused_at_write(tmp_path):
    with pytest.raises(ArtifactError, match="JSON"):
        write_artifact(tmp_path / "m", kind="k", meta={"x": object()}, arrays={})


def test_other_vocabulary_fingerprint_is_refused(artifact_path):
    with pytest.raises(ArtifactError, match=f"compiled for vocabulary {FP}, got cd"):
        read_artifact(artifact_path, kind="mask", expect_fingerprint="cd" * 32)


def test_other_kind_is_refused(artifact_path):
    with pytest.raises(ArtifactError, match="'mask', expected 'trie'"):
        read_artifact(artifact_path, kind="trie")


def test_wrong_magic_is_refused(tmp_path):
    path = tmp_path / "x.npz"
    np.savez(path, a=np.arange(3))
    with pytest.raises(ArtifactError, match="not a glrmask artifact"):
        read_artifact(path, kind="mask")


def test_empty_file_is_refused(tmp_path):
    (tmp_path / "z").write_bytes(b"")
    with pytest.raises(ArtifactError, match="not a glrmask artifact"):
        read_artifact(tmp_path / "z", kind="mask")


def test_missing_file_is_an_artifact_error(tmp_path):
    with pytest.raises(ArtifactError, match="no such artifact"):
        read_artifact(tmp_path / "nope", kind="mask")


def test_other_format_version_is_refused_with_a_recompile_hint(artifact_path):
    data = bytearray(artifact_path.read_bytes())
    struct.pack_into("<I", data, 8, FORMAT_VERSION + 1)
    artifact_path.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match=f"format {FORMAT_VERSION + 1}, this glrmask reads "
                                            f"{FORMAT_VERSION}: recompile"):
        read_artifact(artifact_path, kind="mask")


@pytest.mark.parametrize("keep", [0, 7, 15, 100, -33, -32, -1])
def test_truncated_file_is_refused(artifact_path, keep):
    data = artifact_path.read_bytes()
    artifact_path.write_bytes(data[:keep] if keep >= 0 else data[:len(data) + keep])
    with pytest.raises(ArtifactError):
        read_artifact(artifact_path, kind="mask")


def test_truncation_is_named_in_the_message(artifact_path):
    data = artifact_path.read_bytes()
    artifact_path.write_bytes(data[:-100])
    with pytest.raises(ArtifactError, match="truncated"):
        read_artifact(artifact_path, kind="mask")


def test_trailing_bytes_are_refused(artifact_path):
    artifact_path.write_bytes(artifact_path.read_bytes() + b"\0")
    with pytest.raises(ArtifactError, match="corrupted"):
        read_artifact(artifact_path, kind="mask")


def test_flipped_byte_in_array_data_is_reported_as_corrupted(artifact_path):
    art = read_artifact(artifact_path, kind="mask")
    offset = art.header["arrays"]["u64"]["offset"] + 5
    del art
    data = bytearray(artifact_path.read_bytes())
    data[offset] ^= 0x01
    artifact_path.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="corrupted"):
        read_artifact(artifact_path, kind="mask")


def test_one_flipped_byte_anywhere_is_refused(artifact_path):
    pristine = artifact_path.read_bytes()
    rng = random.Random(1234)
    positions = set(range(0, 24)) | set(range(len(pristine) - 40, len(pristine)))
    positions |= {rng.randrange(len(pristine)) for _ in range(120)}
    for pos in sorted(positions):
        data = bytearray(pristine)
        data[pos] ^= 1 << rng.randrange(8)
        artifact_path.write_bytes(bytes(data))
        with pytest.raises(ArtifactError):
            read_artifact(artifact_path, kind="mask", expect_fingerprint=FP)


def test_verify_false_skips_only_the_checksum(artifact_path):
    data = bytearray(artifact_path.read_bytes())
    data[-1] ^= 0xFF  # damage the stored checksum itself
    artifact_path.write_bytes(bytes(data))
    art = read_artifact(artifact_path, kind="mask", verify=False)
    np.testing.assert_array_equal(art.arrays["u8"], sample_arrays()["u8"])
    with pytest.raises(ArtifactError, match="checksum"):
        read_artifact(artifact_path, kind="mask")
