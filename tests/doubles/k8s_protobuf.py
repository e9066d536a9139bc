# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Decode the Kubernetes protobuf bodies that helm sends, for the API double (tests/doubles/k8s.py).

client-go's typed clients (helm's release storage among them) write with
``Content-Type: application/vnd.kubernetes.protobuf``: the 4 bytes ``k8s\\0``, then a ``runtime.Unknown``
message (apiVersion, kind, and the object as protobuf in ``raw``). Only the messages helm sends are
described here: core/v1 Secret (release records) and meta/v1 DeleteOptions (uninstall). Anything else,
and any field the description lacks, is refused with a message that says so, so that a gap shows as a
clear 415/400 instead of a silently dropped field. Answers stay JSON: those clients accept it.

Field numbers are those of k8s.io/api/core/v1/generated.proto and k8s.io/apimachinery/pkg/apis/meta/v1/
generated.proto.
"""

from __future__ import annotations

import base64
import datetime

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"


class ProtobufError(ValueError):
    """A body the double cannot decode (the message names what and where)."""


# a message description: field number -> (JSON name, type); types are scalar names, ("map", value type),
# ("repeated", type) or another description (a nested message)
_TIME = {1: ("seconds", "int64"), 2: ("nanos", "int32")}
_OWNER_REFERENCE = {1: ("kind", "string"), 3: ("name", "string"), 4: ("uid", "string"), 5: ("apiVersion", "string"),
                    6: ("controller", "bool"), 7: ("blockOwnerDeletion", "bool")}
_OBJECT_META = {
    1: ("name", "string"), 2: ("generateName", "string"), 3: ("namespace", "string"), 4: ("selfLink", "string"),
    5: ("uid", "string"), 6: ("resourceVersion", "string"), 7: ("generation", "int64"),
    8: ("creationTimestamp", _TIME), 9: ("deletionTimestamp", _TIME), 10: ("deletionGracePeriodSeconds", "int64"),
    11: ("labels", ("map", "string")), 12: ("annotations", ("map", "string")),
    13: ("ownerReferences", ("repeated", _OWNER_REFERENCE)), 14: ("finalizers", ("repeated", "string")),
}
_SECRET = {1: ("metadata", _OBJECT_META), 2: ("data", ("map", "bytes")), 3: ("type", "string"),
           4: ("stringData", ("map", "string")), 5: ("immutable", "bool")}
_PRECONDITIONS = {1: ("uid", "string"), 2: ("resourceVersion", "string")}
_DELETE_OPTIONS = {1: ("gracePeriodSeconds", "int64"), 2: ("preconditions", _PRECONDITIONS),
                   3: ("orphanDependents", "bool"), 4: ("propagationPolicy", "string"), 5: ("dryRun", ("repeated", "string"))}
MESSAGES = {("v1", "Secret"): _SECRET, ("v1", "DeleteOptions"): _DELETE_OPTIONS,
            ("meta.k8s.io/v1", "DeleteOptions"): _DELETE_OPTIONS}
_TYPE_META = {1: ("apiVersion", "string"), 2: ("kind", "string")}
_UNKNOWN = {1: ("typeMeta", _TYPE_META), 2: ("raw", "bytes"), 3: ("contentEncoding", "string"),
            4: ("contentType", "string")}


def _varint(data, pos):
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data, where):
    """(number, wire type, value) of each field: varints as ints, length-delimited as bytes."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            size, pos = _varint(data, pos)
            if pos + size > len(data):
                raise ProtobufError("truncated field %d in %s" % (number, where))
            value, pos = data[pos:pos + size], pos + size
        else:
            raise ProtobufError("field %d of %s has wire type %d, which no Kubernetes message here uses"
                                % (number, where, wire))
        yield number, wire, value


def _scalar(kind, wire, value, where):
    if kind in ("string", "bytes"):
        if wire != 2:
            raise ProtobufError("%s: expected a length-delimited %s" % (where, kind))
        return value.decode("utf-8") if kind == "string" else value
    if wire != 0:
        raise ProtobufError("%s: expected a varint %s" % (where, kind))
    if kind == "bool":
        return bool(value)
    return value - (1 << 64) if value >= 1 << 63 else value  # two's complement int64/int32


def _decode(data, description, where):
    message = {}
    for number, wire, value in _fields(data, where):
        if number not in description:
            raise ProtobufError("field %d of %s is not known to the Kubernetes API double" % (number, where))
        name, kind = description[number]
        path = "%s.%s" % (where, name)
        if isinstance(kind, dict):
            message[name] = _decode(value, kind, path)
        elif isinstance(kind, tuple) and kind[0] == "map":
            entry = _decode(value, {1: ("key", "string"), 2: ("value", kind[1])}, path)
            message.setdefault(name, {})[entry.get("key", "")] = entry.get("value", b"" if kind[1] == "bytes" else "")
        elif isinstance(kind, tuple):
            item = _decode(value, kind[1], path) if isinstance(kind[1], dict) else _scalar(kind[1], wire, value, path)
            message.setdefault(name, []).append(item)
        else:
            message[name] = _scalar(kind, wire, value, path)
    return message


def _to_json(value, description):
    """Protobuf values as the JSON form: bytes base64, Time RFC 3339, zero strings/numbers/times left out.

    Go's generated code writes every non-pointer field, empty ones too; decoded into the Go struct they are
    the zero value, which the JSON form omits (``omitempty``).
    """
    if description is _TIME:
        stamp = datetime.datetime.fromtimestamp(value.get("seconds", 0), datetime.timezone.utc)
        return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
    out = {}
    for name, item in value.items():
        if item in ("", 0) and not isinstance(item, bool) or (isinstance(item, dict) and not item.get("seconds", 1)):
            continue
        kind = next(k for n, k in description.values() if n == name)
        if isinstance(kind, dict):
            out[name] = _to_json(item, kind)
        elif isinstance(kind, tuple) and kind[0] == "map" and kind[1] == "bytes":
            out[name] = {k: base64.b64encode(v).decode("ascii") for k, v in item.items()}
        elif isinstance(kind, tuple) and kind[0] == "repeated" and isinstance(kind[1], dict):
            out[name] = [_to_json(i, kind[1]) for i in item]
        else:
            out[name] = item
    return out


def decode(body):
    """The JSON form (a dict with apiVersion and kind) of a ``application/vnd.kubernetes.protobuf`` body."""
    if not body.startswith(MAGIC):
        raise ProtobufError("a Kubernetes protobuf body starts with k8s\\x00")
    envelope = _decode(body[len(MAGIC):], _UNKNOWN, "runtime.Unknown")
    type_meta = envelope.get("typeMeta", {})
    api_version, kind = type_meta.get("apiVersion", ""), type_meta.get("kind", "")
    if envelope.get("contentEncoding"):
        raise ProtobufError("content encoding %r is not supported" % envelope["contentEncoding"])
    description = MESSAGES.get((api_version, kind))
    if description is None:
        raise ProtobufError("the Kubernetes API double decodes protobuf only for %s, not %s %s"
                            % (", ".join("%s %s" % key for key in sorted(MESSAGES)), api_version, kind))
    obj = _to_json(_decode(envelope.get("raw", b""), description, kind), description)
    return dict(obj, apiVersion=api_version, kind=kind)
