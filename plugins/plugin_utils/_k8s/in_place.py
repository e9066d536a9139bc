# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Whether the objects of an apply step are already in place, so that the role apply can skip its
kubernetes.core.k8s call.

``reads(batches, wait)`` turns the calls of ``k8s_apply_batches`` into the reader's queries (one GET per
object, with kubernetes.core's readiness check when the step waits). ``in_place(batches, results)`` marks
each call whose every object is in place, and says for the others which object is not and why.

An object is in place only when (conservative: anything else is applied as today)
- it exists;
- its ``kubectl.kubernetes.io/last-applied-configuration`` annotation (what kubernetes.core's client-side
  apply writes: the JSON of the manifest it sent, ``annotate`` in kubernetes.core 6.2.0 module_utils apply) decodes to a
  document equal to the desired manifest (``same``: strict types, so 1, 1.0, "1" and true all differ);
- every field of the desired manifest is in the live object with an equal value (``covers``: dicts key by
  key, recursively, extra live keys allowed; lists element by element and of the same length);
- when the step waits, kubernetes.core's own readiness check (the wait condition, or its predicate for the
  kind) already holds on the object read.
Reasons name kinds, names and field paths only, never values.
"""

from __future__ import annotations

import json

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def same(left, right):
    """Strict equality of two JSON documents: the same types (bool is not int, int is not float) and values."""
    if isinstance(left, dict):
        return isinstance(right, dict) and left.keys() == right.keys() and all(same(v, right[k]) for k, v in left.items())
    if isinstance(left, list):
        return isinstance(right, list) and len(left) == len(right) and all(same(a, b) for a, b in zip(left, right))
    return type(left) is type(right) and left == right


def covers(desired, live, path=""):
    """The first path where ``live`` does not hold every field of ``desired`` with an equal value, or None.

    Dicts: every desired key must be in live (live may have more); lists: same length, element by element;
    anything else: ``same``."""
    if isinstance(desired, dict):
        if not isinstance(live, dict):
            return path or "."
        for key, value in desired.items():
            where = "%s.%s" % (path, key) if path else str(key)
            if key not in live:
                return where
            found = covers(value, live[key], where)
            if found is not None:
                return found
        return None
    if isinstance(desired, list):
        if not isinstance(live, list) or len(desired) != len(live):
            return path or "."
        for index, (want, have) in enumerate(zip(desired, live)):
            found = covers(want, have, "%s[%d]" % (path, index))
            if found is not None:
                return found
        return None
    return None if same(desired, live) else (path or ".")


def _name(obj):
    meta = obj.get("metadata") or {}
    return "%s/%s" % (obj.get("kind"), ("%s/%s" % (meta["namespace"], meta.get("name"))) if meta.get("namespace")
                      else meta.get("name"))


def reasons(desired, live, ready=None, wait=False):
    """Why the live object is not the desired one in place ([] when it is)."""
    if not isinstance(live, dict) or not live:
        return ["absent"]
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(LAST_APPLIED)
    if not isinstance(text, str):
        return ["no last-applied-configuration annotation"]
    try:
        applied = json.loads(text)
    except ValueError:
        return ["unreadable last-applied-configuration annotation"]
    if not same(applied, desired):
        return ["the manifest differs from the last applied one"]
    found = covers(desired, live)
    if found is not None:
        return ["the live object differs at %s" % found]
    if wait and ready is not True:
        return ["not ready yet"]
    return []


def reads(batches, wait=False):
    """The ``k8s_objects_info`` queries for the objects of ``batches``: one named read per object, in order."""
    if not isinstance(batches, list) or not all(isinstance(b, dict) and isinstance(b.get("definition"), list)
                                                for b in batches):
        raise TypeError("the input must be the calls of k8s_apply_batches")
    queries = []
    for batch in batches:
        for obj in batch["definition"]:
            meta = obj.get("metadata") or {}
            query = {"api_version": obj.get("apiVersion"), "kind": obj.get("kind"), "name": meta.get("name")}
            if meta.get("namespace"):
                query["namespace"] = meta["namespace"]
            if wait:
                query["wait"] = True
                if batch.get("wait_condition"):
                    query["wait_condition"] = batch["wait_condition"]
            queries.append(query)
    return queries


def _matches(obj, query):
    meta = obj.get("metadata") or {}
    return (isinstance(query, dict) and query.get("kind") == obj.get("kind") and query.get("name") == meta.get("name")
            and query.get("api_version") == obj.get("apiVersion")
            and (query.get("namespace") or None) == (meta.get("namespace") or None))


def in_place(batches, results, wait=False):
    """``batches`` with ``in_place`` (true when every object of the call is in place) and ``not_in_place``
    (``Kind/name: reason`` of each object that is not). ``results`` are the per-query results of k8s_objects_info for
    ``reads(batches, wait)``; results that do not pair with the objects leave every call to be applied."""
    queries = reads(batches, wait)
    if not isinstance(results, list):
        results = []
    paired = len(results) == len(queries) and all(isinstance(r, dict) for r in results)
    out = []
    index = 0
    for batch in batches:
        batch = dict(batch)
        why = []
        for obj in batch["definition"]:
            result = results[index] if paired else {}
            index += 1
            found = result.get("resources") if isinstance(result.get("resources"), list) else []
            if not paired or not _matches(obj, result.get("query")):
                problems = ["not read"]
            elif len(found) != 1:
                problems = ["absent"] if not found else ["not one object"]
            else:
                problems = reasons(obj, found[0], result.get("ready"), wait)
            why.extend("%s: %s" % (_name(obj), p) for p in problems)
        batch["in_place"] = not why
        batch["not_in_place"] = why
        out.append(batch)
    return out
