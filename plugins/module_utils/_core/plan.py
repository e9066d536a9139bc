# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""One plan/diff helper for every module.

An engine reads the current state, compares it with the desired state, and records what it would
change in a Plan. The same Plan then gives the module's ``changed`` flag, the ``--diff`` output,
the check-mode result and the ``changes`` list it returns; only outside check mode does the engine
go on to carry the changes out.
"""

from __future__ import annotations

import copy

CREATE = "create"
UPDATE = "update"
DELETE = "delete"
RECREATE = "recreate"
ACTIONS = (CREATE, UPDATE, DELETE, RECREATE)


def as_given(values, *names):
    """The options ``names`` of ``values`` as the user gave them (None: not set): the part of a desired
    view that needs no reshaping."""
    return {name: values.get(name) for name in names}


def differing_fields(desired, current, prefix=""):
    """Dotted paths of the fields set in ``desired`` whose value differs in ``current``.

    Only what ``desired`` sets is compared: a field the user did not ask for is left alone.
    Lists compare as wholes; dicts recurse.
    """
    fields = []
    current = current or {}
    for key in sorted(desired):
        want = desired[key]
        if want is None:
            continue
        path = prefix + key
        have = current.get(key) if isinstance(current, dict) else None
        if isinstance(want, dict) and isinstance(have, dict):
            fields.extend(differing_fields(want, have, path + "."))
        elif isinstance(want, dict) and have is None and not _has_value(want):
            continue
        elif not _same(want, have):
            fields.append(path)
    return fields


def _has_value(value):
    if isinstance(value, dict):
        return any(_has_value(v) for v in value.values())
    return value is not None


def _same(want, have):
    if isinstance(want, dict):
        return isinstance(have, dict) and not differing_fields(want, have)
    if isinstance(want, (list, tuple)):
        if not isinstance(have, (list, tuple)) or len(want) != len(have):
            return False
        return all(_same(w, h) for w, h in zip(want, have))
    # int64 fields arrive as strings from Google APIs: compare by text.
    if isinstance(want, (int, float)) and not isinstance(want, bool) and isinstance(have, str):
        return str(want) == have
    return want == have


def pick(document, fields):
    """The part of ``document`` holding the dotted ``fields`` (for a focused diff)."""
    picked = {}
    for field in fields:
        parts = field.split(".")
        source = document or {}
        for part in parts[:-1]:
            source = source.get(part) if isinstance(source, dict) else None
        if not (isinstance(source, dict) and parts[-1] in source):
            continue
        target = picked
        for part in parts[:-1]:
            target = target.setdefault(part, {})
        target[parts[-1]] = copy.deepcopy(source[parts[-1]])
    return picked


class Change:
    """One change to one resource."""

    def __init__(self, action, kind, name, before=None, after=None, fields=None, request=None):
        if action not in ACTIONS:
            raise ValueError("unknown action %r" % action)
        self.action = action
        self.kind = kind
        self.name = name
        self.before = before
        self.after = after
        self.fields = list(fields or [])
        self.request = request
        # (before, after) text of a managed file: --diff then shows the file itself, which Ansible
        # renders as a unified diff, instead of a JSON document of its lines
        self.text = None

    @property
    def key(self):
        return "%s/%s" % (self.kind, self.name)

    def as_dict(self):
        result = dict(action=self.action, kind=self.kind, name=self.name)
        if self.fields:
            result["fields"] = self.fields
        return result

    def as_diff(self):
        if self.text is not None:
            return dict(before_header="%s (%s)" % (self.key, "absent" if self.before is None else "current"),
                        after_header="%s (%s)" % (self.key, self.action), before=self.text[0], after=self.text[1])
        before = self.before
        after = self.after
        if self.action == UPDATE and self.fields:
            before, after = pick(before, self.fields), pick(after, self.fields)
        return dict(
            before_header="%s (%s)" % (self.key, "absent" if before is None else "current"),
            after_header="%s (%s)" % (self.key, "absent" if after is None else self.action),
            before=_diff_text(before),
            after=_diff_text(after),
        )


def _diff_text(document):
    if document is None:
        return ""
    import json  # pylint: disable=import-outside-toplevel

    return json.dumps(document, indent=2, sort_keys=True) + "\n"


class Plan:
    """The ordered changes an engine intends to make."""

    def __init__(self):
        self.changes = []

    def add(self, action, kind, name, before=None, after=None, fields=None, request=None):
        change = Change(action, kind, name, before=before, after=after, fields=fields, request=request)
        self.changes.append(change)
        return change

    def create(self, kind, name, after, request=None):
        return self.add(CREATE, kind, name, after=after, request=request)

    def update(self, kind, name, before, after, fields, request=None):
        return self.add(UPDATE, kind, name, before=before, after=after, fields=fields, request=request)

    def delete(self, kind, name, before, request=None):
        return self.add(DELETE, kind, name, before=before, request=request)

    def recreate(self, kind, name, before, after, fields, request=None):
        return self.add(RECREATE, kind, name, before=before, after=after, fields=fields, request=request)

    def compare(self, kind, name, desired, current, request=None):
        """Record a create or an update of one resource from its desired and current documents."""
        if current is None:
            return self.create(kind, name, desired, request=request)
        fields = differing_fields(desired, current)
        if fields:
            return self.update(kind, name, current, desired, fields, request=request)
        return None

    def of(self, *actions):
        return [c for c in self.changes if c.action in actions]

    @property
    def changed(self):
        return bool(self.changes)

    def result(self, diff=False):
        """The module-result keys every engine returns: changed, changes and (on --diff) diff."""
        result = dict(changed=self.changed, changes=[c.as_dict() for c in self.changes])
        if diff:
            result["diff"] = [c.as_diff() for c in self.changes]
        return result


def resulting_document(state, check_mode, changed, current, render, read, desired, answered=None):
    """The resource a module returns after its run (one rule for every engine).

    Absent: the current document in check mode (nothing was deleted), else nothing. Present and
    unchanged, or check mode: the current document. Changed: the resource as the last write
    answered it (``answered``, for APIs that answer with it), else read back (``read()``) except in
    render mode, where nothing exists; when neither gives a document, the desired one
    (``desired()``) stands in.
    """
    if state == "absent":
        return current if check_mode else None
    if check_mode or not changed:
        return current
    document = answered
    if document is None and not render:
        document = read()
    return desired() if document is None else document
