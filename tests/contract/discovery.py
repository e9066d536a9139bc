# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validate Google API request bodies against the discovery documents shipped in google-api-python-client.

Used by the GCP double (every request body it receives) and by contract tests::

    from ansible_collections.gpu_ops.cluster.tests.contract.discovery import discovery

    doc = discovery("container", "v1")                      # or ("container", "v1beta1"), ("compute", "v1")
    doc.validate("CreateClusterRequest", body)               # -> list of "field: problem" strings
    method = doc.match("POST", "v1/projects/p/locations/l/clusters")   # path relative to the API root
    problems = doc.validate_request("POST", "v1/projects/p/locations/l/clusters", body, query={})

What is checked (what the real API rejects with 400 INVALID_ARGUMENT):
- unknown fields, at any depth (the message names the dotted path, e.g. ``cluster.networkConfig.foo``);
- JSON types: string / boolean / integer (int32, uint32) / number / array / object;
- int64 and uint64 fields must be sent as decimal strings (Google's JSON mapping), not JSON numbers;
- enum values;
- query parameters that the method does not declare.

Output-only fields are accepted (the real APIs ignore them on input).
"""

from __future__ import annotations

import json
import os
import re
import threading

_CACHE = {}
_LOCK = threading.Lock()

INT64_FORMATS = ("int64", "uint64")
INT32_FORMATS = ("int32", "uint32")
_INT_TEXT = re.compile(r"^-?\d+$")
# query parameters every Google API accepts (system parameters)
SYSTEM_PARAMETERS = frozenset((
    "$.xgafv", "access_token", "alt", "callback", "fields", "key", "oauth_token", "prettyPrint", "quotaUser",
    "uploadType", "upload_protocol", "userIp",
))


def documents_dir():
    """Folder of the discovery documents of the installed google-api-python-client."""
    import googleapiclient  # pylint: disable=import-outside-toplevel

    return os.path.join(os.path.dirname(googleapiclient.__file__), "discovery_cache", "documents")


def discovery(api, version):
    """The (cached) Discovery of ``api`` ``version``, e.g. discovery("compute", "v1")."""
    key = (api, version)
    with _LOCK:
        if key not in _CACHE:
            path = os.path.join(documents_dir(), "%s.%s.json" % (api, version))
            with open(path) as handle:
                _CACHE[key] = Discovery(json.load(handle))
        return _CACHE[key]


class Method:
    """One REST method: its id, HTTP method, path regex, request schema and query parameters."""

    def __init__(self, method_id, http_method, template, request, parameters):
        self.id = method_id
        self.http_method = http_method
        self.template = template
        self.request = request
        self.query_parameters = frozenset(
            name for name, spec in (parameters or {}).items() if spec.get("location") == "query")
        self.parameters = parameters or {}
        self.regex = re.compile("^" + _template_regex(template) + "$")

    def __repr__(self):
        return "Method(%s %s %s)" % (self.id, self.http_method, self.template)


def _template_regex(template):
    out = []
    pos = 0
    for match in re.finditer(r"\{(\+?)([^}]+)\}", template):
        out.append(re.escape(template[pos:match.start()]))
        out.append("(?P<%s>%s)" % (re.sub(r"[^A-Za-z0-9_]", "_", match.group(2)),
                                   ".+" if match.group(1) else "[^/:]+"))
        pos = match.end()
    out.append(re.escape(template[pos:]))
    return "".join(out)


class Discovery:
    """A loaded discovery document."""

    def __init__(self, document):
        self.document = document
        self.name = document.get("name")
        self.version = document.get("version")
        self.service_path = document.get("servicePath") or ""
        self.schemas = document.get("schemas", {})
        self.methods = []
        self._collect(document.get("resources", {}))

    def _collect(self, resources):
        for resource in resources.values():
            for spec in resource.get("methods", {}).values():
                template = spec.get("flatPath") or spec["path"]
                request = (spec.get("request") or {}).get("$ref")
                self.methods.append(Method(spec["id"], spec["httpMethod"], self.service_path + template, request,
                                           spec.get("parameters")))
            self._collect(resource.get("resources", {}))
        # more specific templates first (literal characters beat placeholders)
        self.methods.sort(key=lambda m: -len(re.sub(r"\{[^}]+\}", "", m.template)))

    def match(self, http_method, path):
        """The Method serving ``http_method path`` (path relative to the API root, no query), or None."""
        path = path.lstrip("/")
        for method in self.methods:
            if method.http_method == http_method and method.regex.match(path):
                return method
        return None

    def validate_request(self, http_method, path, body, query=None):
        """Problems with one request (unknown method counts as a problem)."""
        method = self.match(http_method, path)
        if method is None:
            return ["no %s.%s method serves %s %s" % (self.name, self.version, http_method, path)]
        problems = []
        for name in sorted(query or {}):
            if name not in method.query_parameters and name not in SYSTEM_PARAMETERS:
                problems.append("query parameter %r is not accepted by %s" % (name, method.id))
        if method.request:
            if body is None:
                problems.append("%s needs a %s request body" % (method.id, method.request))
            else:
                problems.extend(self.validate(method.request, body))
        elif body not in (None, {}):
            problems.append("%s takes no request body" % method.id)
        return problems

    def validate(self, schema_name, value, path=""):
        """Problems of ``value`` against the schema named ``schema_name`` (list of strings)."""
        if schema_name not in self.schemas:
            raise KeyError("no schema %s in %s.%s" % (schema_name, self.name, self.version))
        problems = []
        self._check(self.schemas[schema_name], value, path, problems)
        return problems

    def _check(self, spec, value, path, problems):
        if "$ref" in spec:
            spec = self.schemas[spec["$ref"]]
        if value is None:  # JSON null means "not set" in Google's JSON mapping
            return
        kind = spec.get("type")
        where = path or "(body)"
        if kind == "object":
            if not isinstance(value, dict):
                problems.append("%s: expected an object, got %s" % (where, _json_type(value)))
                return
            properties = spec.get("properties")
            additional = spec.get("additionalProperties")
            for key in value:
                child = "%s.%s" % (path, key) if path else key
                if properties is not None and key in properties:
                    self._check(properties[key], value[key], child, problems)
                elif additional is not None:
                    self._check(additional, value[key], child, problems)
                elif properties is not None or additional is None:
                    problems.append("%s: unknown field (Invalid JSON payload received. Unknown name %r)" % (child, key))
        elif kind == "array":
            if not isinstance(value, list):
                problems.append("%s: expected an array, got %s" % (where, _json_type(value)))
                return
            for index, item in enumerate(value):
                self._check(spec.get("items", {}), item, "%s[%d]" % (path, index), problems)
        elif kind == "string":
            fmt = spec.get("format")
            if fmt in INT64_FORMATS:
                if not isinstance(value, str):
                    problems.append("%s: %s must be sent as a decimal string, got %s" % (where, fmt, _json_type(value)))
                elif not _INT_TEXT.match(value):
                    problems.append("%s: %r is not a decimal %s" % (where, value, fmt))
                return
            if not isinstance(value, str):
                problems.append("%s: expected a string, got %s" % (where, _json_type(value)))
                return
            if "enum" in spec and value not in spec["enum"]:
                problems.append("%s: invalid value %r; allowed: %s" % (where, value, ", ".join(spec["enum"])))
        elif kind == "boolean":
            if not isinstance(value, bool):
                problems.append("%s: expected a boolean, got %s" % (where, _json_type(value)))
        elif kind == "integer":
            if isinstance(value, bool) or not isinstance(value, int):
                problems.append("%s: expected an integer, got %s" % (where, _json_type(value)))
            elif spec.get("format") == "int32" and not -2 ** 31 <= value < 2 ** 31:
                problems.append("%s: %d is out of int32 range" % (where, value))
            elif spec.get("format") == "uint32" and not 0 <= value < 2 ** 32:
                problems.append("%s: %d is out of uint32 range" % (where, value))
        elif kind == "number":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                problems.append("%s: expected a number, got %s" % (where, _json_type(value)))
        # "any" or untyped: anything goes


def _json_type(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean %s" % json.dumps(value)
    if isinstance(value, (int, float)):
        return "number %s" % json.dumps(value)
    if isinstance(value, str):
        return "string %s" % json.dumps(value[:40])
    if isinstance(value, list):
        return "array"
    return "object"
