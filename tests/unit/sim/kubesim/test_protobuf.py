"""The protobuf decoding of kubectl's typed-generator bodies (field numbers from upstream's
generated.proto; the conformance test checks them against kubectl's own bodies)."""

from __future__ import annotations

import pytest

from kubespot.sim.kubesim.protobuf import MAGIC, ProtobufError, decode_object


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _entry(key: str, value: bytes) -> bytes:
    return _field(1, key.encode()) + _field(2, value)


def _envelope(kind: str, raw: bytes) -> bytes:
    type_meta = _field(1, b"v1") + _field(2, kind.encode())
    return MAGIC + _field(1, type_meta) + _field(2, raw)


def test_configmap_with_labels_and_data() -> None:
    meta = _field(1, b"cm") + _field(2, b"") + _field(11, _entry("app", b"web")) + _field(8, b"")
    raw = _field(1, meta) + _field(2, _entry("a", b"1")) + _field(3, _entry("bin", b"\x00\x01"))
    obj = decode_object(_envelope("ConfigMap", raw))
    assert obj == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cm", "labels": {"app": "web"}},
        "data": {"a": "1"},
        "binaryData": {"bin": "AAE="},
    }


def test_namespace_finalizers_are_a_repeated_string() -> None:
    raw = _field(1, _field(1, b"ns")) + _field(2, _field(1, b"kubernetes") + _field(1, b"x"))
    assert decode_object(_envelope("Namespace", raw))["spec"] == {"finalizers": ["kubernetes", "x"]}


@pytest.mark.parametrize(
    "body",
    [
        b"not protobuf",
        MAGIC + b"\x0a\xff",  # a length running past the end
        _envelope("Deployment", b""),  # a kind kubesim does not decode
        MAGIC + _varint(1 << 3 | 3),  # a group wire type
    ],
)
def test_undecodable_bodies_raise_protobuf_error(body: bytes) -> None:
    with pytest.raises(ProtobufError):
        decode_object(body)
