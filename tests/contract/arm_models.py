# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Strict validation of ARM request bodies against azure-mgmt-containerservice's models.

The SDK's models (TypeSpec-generated, ``azure.mgmt.containerservice._utils.model_base``) deserialize
anything: unknown keys are kept, wrong types and unknown enum values pass (the enums are
"extensible", typed ``Union[str, Enum]``). The real service is stricter, so this module walks the
model classes itself - each field's REST name, Python annotation and visibility - and reports:

- unknown properties, at any depth (the dotted REST path, e.g. ``properties.gpuInstanceProfile``);
- JSON types: string / boolean / integer / number / array / object, ``null`` only where the
  field is Optional;
- enum values (the SDK enum of the field, exact spelling), e.g. ``gpuInstanceProfile`` must be one of
  MIG1g, MIG2g, MIG3g, MIG4g, MIG7g;
- required properties (fields whose annotation is not Optional and that can be written);
- read-only properties (visibility ``read`` only): reported with ``readonly="reject"`` (what our
  engines must never send), skipped with ``readonly="ignore"`` (what ARM does with them).

Usage::

    from ansible_collections.gpu_ops.cluster.tests.contract.arm_models import check, validate, API_VERSION

    problems = validate("AgentPool", body)               # -> ["properties.count: expected integer, got 'three'"]
    pool = check("AgentPool", body)                      # the SDK model instance, or ModelError
    read_only_paths("AgentPool")                         # {"id", "name", "properties.provisioningState", ...}

``API_VERSION`` is the api-version these models describe (the SDK's default); the ARM double
accepts that one only.
"""

from __future__ import annotations

import datetime
import enum
import re
import sys
import threading
import typing

from azure.mgmt.containerservice import models as _models
from azure.mgmt.containerservice._configuration import ContainerServiceClientConfiguration


def _default_api_version():
    """The api-version the installed SDK's models were generated for (the client's default)."""
    return ContainerServiceClientConfiguration(credential=object(), subscription_id="-").api_version


API_VERSION = _default_api_version()

_LOCK = threading.Lock()
_SCHEMAS = {}
_NONE = type(None)
_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class ModelError(ValueError):
    """A body the service would reject; ``problems`` lists every finding."""

    def __init__(self, model, problems):
        self.model = model
        self.problems = list(problems)
        super().__init__("%s: %s" % (model, "; ".join(self.problems)))


class Field:
    """One property of a model: REST name, annotation, whether it is read-only and whether required."""

    def __init__(self, attr, rest_name, hint, visibility):
        self.attr = attr
        self.rest_name = rest_name
        self.hint = hint
        self.visibility = list(visibility or ["read", "create", "update", "delete", "query"])
        self.read_only = not any(v in self.visibility for v in ("create", "update"))
        self.optional = _is_optional(hint)

    @property
    def required(self):
        return not self.optional and not self.read_only

    def __repr__(self):
        return "Field(%s -> %s: %r%s)" % (self.attr, self.rest_name, self.hint, " read-only" if self.read_only else "")


def model_class(model):
    """The SDK model class for a name (``"AgentPool"``) or the class itself."""
    if isinstance(model, str):
        cls = getattr(_models, model, None)
        if cls is None or not _is_model(cls):
            raise KeyError("azure-mgmt-containerservice has no model %r" % model)
        return cls
    return model


def schema(model):
    """``{rest name: Field}`` of a model class (cached)."""
    cls = model_class(model)
    with _LOCK:
        if cls not in _SCHEMAS:
            cls.__new__(cls)  # the SDK computes _attr_to_rest_field on first instantiation
            module_globals = vars(sys.modules[cls.__module__])
            hints = typing.get_type_hints(cls, globalns=module_globals, localns={"_models": _models})
            fields = {}
            for attr, rest_field in cls._attr_to_rest_field.items():  # pylint: disable=protected-access
                rest_name = rest_field._rest_name  # pylint: disable=protected-access
                fields[rest_name] = Field(attr, rest_name, hints.get(attr, typing.Any),
                                          rest_field._visibility)  # pylint: disable=protected-access
            _SCHEMAS[cls] = fields
        return _SCHEMAS[cls]


def validate(model, body, readonly="reject", path=""):
    """Every problem the service would find in ``body`` as a ``model``; [] when it is valid."""
    if readonly not in ("reject", "ignore"):
        raise ValueError("readonly must be 'reject' or 'ignore'")
    problems = []
    _check_model(model_class(model), body, path, readonly, problems)
    return problems


def check(model, body, readonly="reject"):
    """The SDK model instance of a valid ``body``; ModelError listing the problems otherwise."""
    cls = model_class(model)
    problems = validate(cls, body, readonly=readonly)
    if problems:
        raise ModelError(cls.__name__, problems)
    return cls(body)


def read_only_paths(model, prefix=""):
    """Dotted REST paths of the read-only properties of ``model`` (nested models included, lists not)."""
    paths = set()
    for rest_name, field in schema(model).items():
        path = prefix + rest_name
        if field.read_only:
            paths.add(path)
            continue
        inner = _model_in(field.hint)
        if inner is not None:
            paths.update(read_only_paths(inner, path + "."))
    return paths


def enum_values(model, dotted):
    """The allowed values of an enum property given by its dotted REST path, e.g. ``properties.osSKU``."""
    cls = model_class(model)
    parts = dotted.split(".")
    for part in parts[:-1]:
        cls = _model_in(schema(cls)[part].hint)
    enum_cls = _enum_in(schema(cls)[parts[-1]].hint)
    return [member.value for member in enum_cls] if enum_cls else None


# ------------------------------------------------------------------------------------------ internals


def _is_model(cls):
    return isinstance(cls, type) and hasattr(cls, "_attr_to_rest_field") or (
        isinstance(cls, type) and any(base.__name__ == "Model" for base in cls.__mro__[1:]))


def _is_optional(hint):
    return typing.get_origin(hint) is typing.Union and _NONE in typing.get_args(hint)


def _strip_optional(hint):
    if typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not _NONE]
        if len(args) == 1:
            return args[0]
        return typing.Union[tuple(args)]
    return hint


def _enum_in(hint):
    hint = _strip_optional(hint)
    candidates = typing.get_args(hint) if typing.get_origin(hint) is typing.Union else (hint,)
    for candidate in candidates:
        if isinstance(candidate, type) and issubclass(candidate, enum.Enum):
            return candidate
    return None


def _model_in(hint):
    hint = _strip_optional(hint)
    if isinstance(hint, type) and _is_model(hint):
        return hint
    return None


def _describe(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_model(cls, body, path, readonly, problems):
    if not isinstance(body, dict):
        problems.append("%s: expected object (%s), got %s" % (path.rstrip(".") or "(body)", cls.__name__,
                                                              _describe(body)))
        return
    fields = schema(cls)
    for key, value in body.items():
        where = path + key
        field = fields.get(key)
        if field is None:
            close = [n for n in fields if n.lower() == str(key).lower()]
            hint = " (did you mean %s?)" % close[0] if close else ""
            problems.append("%s: unknown property of %s%s" % (where, cls.__name__, hint))
            continue
        if field.read_only:
            if readonly == "reject":
                problems.append("%s: read-only property (the service ignores it; do not send it)" % where)
            continue
        _check_value(field.hint, value, where, readonly, problems)
    for key, field in fields.items():
        if field.required and key not in body:
            problems.append("%s: required property of %s is missing" % (path + key, cls.__name__))


def _check_value(hint, value, path, readonly, problems):  # pylint: disable=too-many-return-statements,too-many-branches
    if value is None:
        if not _is_optional(hint) and hint is not typing.Any:
            problems.append("%s: must not be null" % path)
        return
    hint = _strip_optional(hint)
    if hint is typing.Any:
        return
    enum_cls = _enum_in(hint)
    if enum_cls is not None:
        allowed = [member.value for member in enum_cls]
        if not isinstance(value, str):
            problems.append("%s: expected string (one of %s), got %s" % (path, "|".join(allowed), _describe(value)))
        elif value not in allowed:
            problems.append("%s: %s is not one of %s" % (path, _describe(value), "|".join(allowed)))
        return
    origin = typing.get_origin(hint)
    if origin is typing.Union:
        for option in typing.get_args(hint):
            trial = []
            _check_value(option, value, path, readonly, trial)
            if not trial:
                return
        problems.append("%s: %s matches none of %s" % (path, _describe(value), hint))
        return
    if origin in (list, typing.List):
        if not isinstance(value, list):
            problems.append("%s: expected array, got %s" % (path, _describe(value)))
            return
        (item_hint,) = typing.get_args(hint) or (typing.Any,)
        for index, item in enumerate(value):
            _check_value(item_hint, item, "%s[%d]" % (path, index), readonly, problems)
        return
    if origin in (dict, typing.Dict):
        if not isinstance(value, dict):
            problems.append("%s: expected object (map), got %s" % (path, _describe(value)))
            return
        args = typing.get_args(hint)
        value_hint = args[1] if len(args) == 2 else typing.Any
        for key, item in value.items():
            if not isinstance(key, str):
                problems.append("%s: map keys must be strings, got %s" % (path, _describe(key)))
            _check_value(value_hint, item, "%s.%s" % (path, key), readonly, problems)
        return
    if isinstance(hint, type) and _is_model(hint):
        _check_model(hint, value, path + ".", readonly, problems)
        return
    _check_scalar(hint, value, path, problems)


def _check_scalar(hint, value, path, problems):
    if hint is bool:
        ok, expected = isinstance(value, bool), "boolean"
    elif hint is int:
        ok, expected = isinstance(value, int) and not isinstance(value, bool), "integer"
    elif hint is float:
        ok, expected = isinstance(value, (int, float)) and not isinstance(value, bool), "number"
    elif hint is str:
        ok, expected = isinstance(value, str), "string"
    elif hint is bytes:
        ok, expected = isinstance(value, str), "string (base64)"
    elif hint is datetime.datetime:
        ok, expected = isinstance(value, str) and bool(_DATETIME.match(value)), "string (RFC 3339 date-time)"
    elif hint is datetime.date:
        ok, expected = isinstance(value, str) and bool(_DATE.match(value)), "string (date YYYY-MM-DD)"
    elif hint is datetime.timedelta:
        ok, expected = isinstance(value, str) and value.startswith("P"), "string (ISO 8601 duration)"
    else:  # pragma: no cover - an annotation this walker does not know yet
        problems.append("%s: cannot check a value of type %r" % (path, hint))
        return
    if not ok:
        problems.append("%s: expected %s, got %s" % (path, expected, _describe(value)))
