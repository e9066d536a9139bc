# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Cloud-neutral input checks: the ``Problems`` list and the node labels and taints of a pool.

Every check appends ``"<option>: <problem>"`` to a ``Problems`` list, so that a module reports all
bad input at once, names each option (with its path for sub-options) and does so before any
request is sent. Node labels and taints are Kubernetes' own syntax on every cloud; each engine maps
the parsed taints to its API (GKE: ``NO_SCHEDULE``; AKS: the ``key=value:Effect`` text).
"""

from __future__ import annotations

import re

LABEL_NAME = re.compile(r"^[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?\Z")
LABEL_VALUE = re.compile(r"^(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?\Z")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?\Z")
TAINT = re.compile(r"^(?P<key>[^=:\s]+)(?:=(?P<value>[^:\s]*))?:(?P<effect>[A-Za-z]+)\Z")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

# A Linux network interface name: the kernel takes 1 to 15 bytes (IFNAMSIZ 16 with the NUL), neither "." nor "..",
# without "/", ":" or white space (torvalds/linux v6.12 net/core/dev.c, dev_valid_name). The collection also keeps
# shell and list metacharacters out (names go into env files, shell exports and comma lists): letters, digits and
# "_", ".", "-", not starting with "." or "-".
INTERFACE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}\Z")
INTERFACE_NAME_RULE = "1 to 15 letters, digits, '_', '.' or '-', not starting with '.' or '-' (a Linux interface name)"


class Problems:
    """Collects ``option: problem`` lines."""

    def __init__(self):
        self.items = []
        self.warnings = []  # what could not be checked (reported, never a failure)

    def add(self, option, message):
        self.items.append("%s: %s" % (option, message))

    def extend(self, lines):
        """Add ``option: problem`` lines written elsewhere (a catalog's rules)."""
        self.items.extend(lines)

    def __bool__(self):
        return bool(self.items)

    def message(self, what):
        return "invalid %s input (nothing was changed): %s" % (what, "; ".join(self.items))


def interface_name_problem(value):
    """Why ``value`` is not a Linux network interface name (INTERFACE_NAME_RULE), or None."""
    if isinstance(value, str) and INTERFACE_NAME.match(value):
        return None
    return "%r is not %s" % (value, INTERFACE_NAME_RULE)


def _label_key_ok(key):
    prefix, dummy, name = key.rpartition("/")
    return bool(LABEL_NAME.match(name)) and (not prefix or (len(prefix) <= 253 and bool(DNS_SUBDOMAIN.match(prefix))))


def check_labels(problems, option, labels):
    """Kubernetes label keys and values."""
    for key, value in (labels or {}).items():
        key = "%s" % (key,)
        if not _label_key_ok(key):
            problems.add(option, "%r is not a valid Kubernetes label key" % (key,))
        if value is None or isinstance(value, (dict, list)):
            problems.add("%s.%s" % (option, key), "label values must be strings")
        elif not LABEL_VALUE.match("%s" % (value,)):
            problems.add("%s.%s" % (option, key), "%r is not a valid Kubernetes label value" % (value,))


def parse_taints(problems, option, taints):
    """``key=value:Effect`` strings -> ``{key, value?, effect}`` dicts (None when ``taints`` is None)."""
    if taints is None:
        return None
    parsed = []
    for text in taints:
        match = TAINT.match(text or "")
        if not match:
            problems.add(option, "%r is not written key=value:Effect" % (text,))
            continue
        key, value, effect = match.group("key"), match.group("value"), match.group("effect")
        if effect not in TAINT_EFFECTS:
            problems.add(option, "%r has effect %r; allowed: %s" % (text, effect, ", ".join(TAINT_EFFECTS)))
        elif not _label_key_ok(key):
            problems.add(option, "%r has an invalid key %r" % (text, key))
        elif value and not LABEL_VALUE.match(value):
            problems.add(option, "%r has an invalid value %r" % (text, value))
        else:
            taint = dict(key=key, effect=effect)
            if value:
                taint["value"] = value
            parsed.append(taint)
    return parsed


def taint_text(taint):
    """A taint dict as ``key=value:Effect``."""
    if taint.get("value"):
        return "%s=%s:%s" % (taint.get("key"), taint["value"], taint.get("effect"))
    return "%s:%s" % (taint.get("key"), taint.get("effect"))


def tolerations(taints):
    """Tolerations that let a pod onto nodes with ``taints`` (parse_taints output): Equal with a value, else Exists."""
    result = []
    for taint in taints or []:
        if taint.get("value"):
            result.append(dict(key=taint["key"], operator="Equal", value=taint["value"], effect=taint["effect"]))
        else:
            result.append(dict(key=taint["key"], operator="Exists", effect=taint["effect"]))
    return result
