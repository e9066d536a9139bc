# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Kubernetes' own naming rules, and the checks the apply role makes on what it is given.

One place for every name a role or module hands to Kubernetes or Helm, or turns into a path:
object names and namespaces (DNS-1123, k8s.io/apimachinery validation), Helm release names
(helm/pkg/chartutil: a DNS-1123 subdomain of at most 53 characters), label keys and values,
container image references (the distribution reference grammar) and render-folder path segments; the files
options name on the controller (a kubeconfig), which must exist and be readable; and the numbers the roles hand to
the tools they run (counts, whole numbers of 1 or more, fractions, nccl-tests message sizes).

``problems(checks)`` returns one ``"<option>: <why>"`` line per bad value and never raises, so a
role can show every problem at once. Values are quoted with ``ascii()`` (control characters and
unicode escaped, long values cut) so a message can always be printed on one line.
"""

from __future__ import annotations

import math
import os
import re

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
HELM_RELEASE_MAX = 53
LABEL_NAME_MAX = 63
LABEL_VALUE_MAX = 63
IMAGE_NAME_MAX = 255
PATH_SEGMENT_MAX = 128
PATH_SHOWN_MAX = 240

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL = re.compile(r"^%s\Z" % _LABEL)
_DNS1123_SUBDOMAIN = re.compile(r"^%s(\.%s)*\Z" % (_LABEL, _LABEL))
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\Z")
_PATH_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z")
# distribution/reference: [domain[:port]/]path-component(/path-component)*[:tag][@digest]
_DOMAIN = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
_IMAGE = re.compile(
    r"^(?:(?P<domain>%s)/)?(?P<path>%s(?:/%s)*)(?::(?P<tag>[\w][\w.-]{0,127}))?"
    r"(?:@(?P<digest>[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?\Z"
    % (_DOMAIN, _PATH_COMPONENT, _PATH_COMPONENT))

# The names API discovery gives the core/v1 Secret resource: kind, plural and singular (it has no short names).
# kubernetes.core resolves a manifest's kind by each of them in turn (K8SClient.resource: kind, name,
# singularName, shortNames), so every one of these spellings creates a Secret; compared case-insensitively.
SECRET_KIND_NAMES = frozenset(("secret", "secrets"))

# nccl-tests' -b/-e sizes (parsesize in src/common.cu of NVIDIA/nccl-tests at d2d40cc: sscanf "%lf %1s"): a number and
# an optional unit letter. It ignores what follows the letter (1MB and 1 MiB are 1M); here only B or iB may follow, so
# that nothing but a size reaches the test's command line.
NCCL_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)\s*(?:([KMGkmg])i?[Bb]?)?\s*\Z")
NCCL_SIZE_UNITS = {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}


def is_secret_kind(kind):
    """Whether the API server would take ``kind`` (any case, surrounding blanks) as the Secret resource."""
    return isinstance(kind, str) and kind.strip().lower() in SECRET_KIND_NAMES


def show(value, limit=80):
    """A value as it may appear in a message: ascii-escaped, one line, at most ``limit`` characters."""
    text = ascii(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _text(value):
    """The value when it is a non-empty string, else the reason it is not."""
    if value is None:
        return None, "is required"
    if not isinstance(value, str):
        return None, "must be a string, got %s" % type(value).__name__
    if not value:
        return None, "must not be empty"
    return value, None


def _bounded(text, maximum, pattern, too_long, refused, shown=None, what=None):
    """None when ``text`` has at most ``maximum`` characters and ``pattern`` matches it; else the message
    ``too_long`` or ``refused``, formatted with {shown} (``text`` as messages show it, unless given), {length},
    {maximum} and {what}."""
    facts = dict(shown=shown if shown is not None else show(text), length=len(text), maximum=maximum, what=what)
    if len(text) > maximum:
        return too_long.format(**facts)
    if not pattern.match(text):
        return refused.format(**facts)
    return None


def dns1123_label(value):
    """None when ``value`` is a DNS-1123 label (namespaces, Service and most short names), else why not."""
    text, why = _text(value)
    return why or _bounded(text, DNS1123_LABEL_MAX, _DNS1123_LABEL,
                           "{shown} is {length} characters long, a DNS-1123 label has at most {maximum}",
                           "{shown} is not a DNS-1123 label (lowercase letters, digits and '-', starting and ending "
                           "with a letter or digit)")


def dns1123_subdomain(value, maximum=DNS1123_SUBDOMAIN_MAX, what="a DNS-1123 subdomain"):
    """None when ``value`` is a DNS-1123 subdomain (most object names), else why not."""
    text, why = _text(value)
    return why or _bounded(text, maximum, _DNS1123_SUBDOMAIN,
                           "{shown} is {length} characters long, {what} has at most {maximum}",
                           "{shown} is not {what} (lowercase letters, digits, '-' and '.', starting and ending with a "
                           "letter or digit)", what=what)


def helm_release(value):
    """None when ``value`` is a Helm release name (a DNS-1123 subdomain of at most 53 characters)."""
    return dns1123_subdomain(value, HELM_RELEASE_MAX, "a Helm release name")


def label_key(value):
    """None when ``value`` is a label (or annotation) key: ``[prefix/]name``."""
    text, why = _text(value)
    if why:
        return why
    prefix, _sep, name = text.rpartition("/")
    if _sep and not prefix:
        return "%s has an empty prefix before '/'" % show(text)
    if prefix:
        why = dns1123_subdomain(prefix)
        if why:
            return "the prefix of %s: %s" % (show(text), why)
    if not name:
        return "%s has no name after the prefix" % show(text)
    return _bounded(name, LABEL_NAME_MAX, _QUALIFIED_NAME,
                    "the name part of {shown} is {length} characters long, at most {maximum}",
                    "{shown} is not a label key (name: letters, digits, '-', '_' and '.', starting and ending with a "
                    "letter or digit; optional DNS subdomain prefix and '/')", shown=show(text))


def label_value(value):
    """None when ``value`` is a label value (may be empty)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return "must be a string, got %s" % type(value).__name__
    return _bounded(str(value), LABEL_VALUE_MAX, _LABEL_VALUE,
                    "{shown} is {length} characters long, a label value has at most {maximum}",
                    "{shown} is not a label value (letters, digits, '-', '_' and '.', starting and ending with a "
                    "letter or digit)")


def labels(value):
    """None when ``value`` is a dict of valid label keys and values, else every reason it is not."""
    if not isinstance(value, dict):
        return "must be a dict of label keys and values, got %s" % type(value).__name__
    reasons = []
    for key in sorted(value, key=str):
        why = label_key(key)
        if why:
            reasons.append("key %s" % why if why.startswith("must") else why)
            continue
        why = label_value(value[key])
        if why:
            reasons.append("%s: %s" % (key, why))
    return "; ".join(reasons) or None


def image(value):
    """None when ``value`` is a container image reference (``[registry/]path[:tag][@digest]``)."""
    text, why = _text(value)
    if why:
        return why
    match = _IMAGE.match(text)
    if not match:
        return ("%s is not an image reference ([registry[:port]/]lowercase/path[:tag][@algorithm:hex])"
                % show(text))
    domain = match.group("domain")
    if domain and not ("." in domain or ":" in domain or domain == "localhost") and not re.match(
            r"^%s\Z" % _PATH_COMPONENT, domain):
        # without '.', ':' or localhost the first part is a repository path component: lowercase only
        return "%s is not an image reference: %s must be lowercase" % (show(text), show(domain))
    name = text.split("@", 1)[0]
    if match.group("tag"):
        name = name[:-(len(match.group("tag")) + 1)]
    if len(name) > IMAGE_NAME_MAX:
        return "the repository of %s is %d characters long, at most %d" % (show(text), len(name), IMAGE_NAME_MAX)
    return None


_IMAGE_TAG = re.compile(r"^[\w][\w.-]{0,127}\Z")


def image_tag(value):
    """None when ``value`` is an image tag (distribution/reference: ``[\\w][\\w.-]{0,127}``); numbers count as text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    text, why = _text(value)
    if why:
        return why
    if not _IMAGE_TAG.match(text):
        return "%s is not an image tag (letters, digits, '_', '.' and '-', at most 128, not starting with '.' or '-')" % (
            show(text),)
    return None


def _image_fields(values, path, found):
    if isinstance(values, list):
        for index, item in enumerate(values):
            _image_fields(item, "%s[%d]" % (path, index), found)
        return
    if not isinstance(values, dict):
        return
    # image fields: image and repository (an image reference; a URL repository is a chart's, not checked) anywhere;
    # tag and version where the dict names an image (image or repository key, or the value of an image key)
    is_image = path.rsplit(".", 1)[-1] == "image" or "image" in values or "repository" in values
    for key in sorted(values, key=str):
        value = values[key]
        where = "%s.%s" % (path, key) if path else str(key)
        if value is None or value == "" or isinstance(value, (dict, list)):
            _image_fields(value, where, found)
            continue
        if key == "image" or (key == "repository" and "://" not in str(value)):
            why = image(value)
        elif is_image and key in ("tag", "version"):
            why = image_tag(value)
        else:
            continue
        if why:
            found.append("%s: %s" % (where, why))


def chart_values_images(value):
    """None when every image field of chart values is valid, else the reasons with their paths: ``image`` and
    ``repository`` (not a URL) at any depth are image references; ``tag`` and ``version`` beside an image or repository,
    or under an ``image`` key, are image tags."""
    if value is None:
        return None
    if not isinstance(value, dict):
        return "chart values must be a dict, got %s" % type(value).__name__
    return "; ".join(image_field_problems(value)) or None


def image_field_problems(values, prefix=""):
    """``"<prefix>.<path>: <why>"`` for every bad image field of ``values`` (see chart_values_images)."""
    found = []
    _image_fields(values, prefix, found)
    return found


_REGISTRY = re.compile(r"^%s(?:/%s)*\Z" % (_DOMAIN, _PATH_COMPONENT))


def registry(value):
    """None when ``value`` is a registry host (with optional port and repository path prefix)."""
    text, why = _text(value)
    if why:
        return why
    if not _REGISTRY.match(text.rstrip("/")) or "://" in text:
        return ("%s is not a registry (host[:port][/lowercase/path], without a scheme or a tag)" % show(text))
    return None


def path_segment(value):
    """None when ``value`` can be one folder or file name under the render folder, else why not.

    Refuses what would leave the folder or make a name hard to review: separators, ``.``/``..``,
    absolute paths, a leading dash, whitespace, control and non-ASCII characters.
    """
    text, why = _text(value)
    if why:
        return why
    if "/" in text or "\\" in text:
        return "%s holds a path separator; it must be a single name inside the render folder" % show(text)
    if text in (".", ".."):
        return "%s would leave its folder" % show(text)
    return _bounded(text, PATH_SEGMENT_MAX, _PATH_SEGMENT, "{shown} is {length} characters long, at most {maximum}",
                    "{shown} is not a plain name (ASCII letters, digits, '.', '_' and '-', starting with a letter or "
                    "digit)")


# Kinds whose names follow apimachinery's path segment rule instead of DNS-1123 (RBAC: system:...).
PATH_SEGMENT_NAME_KINDS = frozenset(("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"))


def path_segment_name(value):
    """None when ``value`` is a valid name for a kind validated as a URL path segment (RBAC objects)."""
    text, why = _text(value)
    if why:
        return why
    if text in (".", "..") or "/" in text or "%" in text:
        return "%s may not be '.' or '..' nor hold '/' or '%%'" % show(text)
    if len(text) > DNS1123_SUBDOMAIN_MAX or any(ord(c) < 32 or c.isspace() for c in text):
        return "%s is not a valid name (at most %d characters, no whitespace)" % (show(text), DNS1123_SUBDOMAIN_MAX)
    return None


def _whole(value):
    if isinstance(value, str) and re.match(r"^\s*-?[0-9]+\s*\Z", value):
        value = int(value)
    return None if isinstance(value, bool) or not isinstance(value, int) else value


def _at_least(value, floor, rule):
    number = _whole(value)
    if number is None:
        return "%s is not a whole number" % show(value)
    if number < floor:
        return "%d %s" % (number, rule)
    return None


def count(value):
    """None when ``value`` is a whole number of 0 or more (retries, a timeout or a delay in seconds), else why not."""
    return _at_least(value, 0, "is negative; retries, timeouts and delays are 0 or more")


def positive(value):
    """None when ``value`` is a whole number of 1 or more (an iteration count, a poll interval, an async limit)."""
    return _at_least(value, 1, "is less than 1; it must be a whole number of 1 or more")


def tolerance(value):
    """None when ``value`` is a fraction of 0 or more and less than 1 (a floor scaled by ``1 - value`` stays above 0)."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return "%s is not a number" % show(value)
    if not 0 <= value < 1:
        return "%s is outside [0, 1): a fraction of 0 or more and less than 1 (0.1 is 10 percent)" % show(value)
    return None


def nccl_size(value):
    """None when nccl-tests takes ``value`` for -b/-e (parsesize, src/common.cu of NVIDIA/nccl-tests at d2d40cc: a
    number, optionally followed by K, M or G in either case, each 1024 times the one before)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return "%s is not a message size" % show(value)
    if not NCCL_SIZE.match(str(value)):
        return "%s is not a message size nccl-tests reads: a number of bytes, optionally followed by K, M or G (8, 1M, 8G)" % (
            show(value))
    return None


def _nccl_bytes(size):
    number, unit = NCCL_SIZE.match(str(size)).groups()
    return float(number) * NCCL_SIZE_UNITS[(unit or "").upper()]


def nccl_size_range(value):
    """None when ``value``, a [min, max] pair of sizes, is a range nccl-tests runs (min <= max; it refuses others);
    a size that is not one is left to ``nccl_size``."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        return "%s is not a [min, max] pair of message sizes" % show(value)
    if any(nccl_size(size) for size in value):
        return None
    low, high = (_nccl_bytes(size) for size in value)
    if low > high:
        return "the smallest size %s is larger than the largest %s; nccl-tests refuses the range" % (
            show(value[0]), show(value[1]))
    return None


def readable_file(value):
    """None when ``value`` names a file of the controller that exists and can be read, else why not. ``~`` and
    environment variables are expanded first, as Ansible expands an option of type path (kubernetes.core's kubeconfig)."""
    text, why = _text(value)
    if why:
        return why
    path = os.path.expanduser(os.path.expandvars(text))
    # a path is shown longer than a name: its end, the file's name, is what tells the user which file
    shown = show(text, PATH_SHOWN_MAX)
    if not os.path.exists(path):
        return "%s does not exist on the controller" % shown
    if not os.path.isfile(path):
        return "%s is not a file" % shown
    if not os.access(path, os.R_OK):
        return "%s cannot be read (its permissions)" % shown
    return None


RULES = {
    "namespace": dns1123_label,
    "dns1123_label": dns1123_label,
    "dns1123_subdomain": dns1123_subdomain,
    "object_name": dns1123_subdomain,
    "helm_release": helm_release,
    "label_key": label_key,
    "label_value": label_value,
    "labels": labels,
    "image": image,
    "image_tag": image_tag,
    "chart_values_images": chart_values_images,
    "registry": registry,
    "path_segment": path_segment,
    "count": count,
    "positive": positive,
    "tolerance": tolerance,
    "nccl_size": nccl_size,
    "nccl_size_range": nccl_size_range,
    "readable_file": readable_file,
}


def check(rule, value, rules=None):
    """None when ``value`` follows ``rule`` (a key of ``rules``, by default RULES), else why not. Unknown rules raise
    ValueError."""
    rules = RULES if rules is None else rules
    if rule not in rules:
        raise ValueError("rule %s is not one of %s" % (show(rule), ", ".join(sorted(rules))))
    return rules[rule](value)


def problems(checks, rules=None):
    """``"<option>: <why>"`` for every bad entry of ``checks``.

    ``checks``: a list of dicts with ``option`` (the name the user knows), ``rule`` (a key of ``rules``, by default
    RULES), ``value`` and optional ``required`` (default true; when false, a null or empty value is skipped).
    """
    if not isinstance(checks, (list, tuple)):
        raise ValueError("the checks must be a list of {option, rule, value} dicts, got %s" % type(checks).__name__)
    found = []
    for index, entry in enumerate(checks):
        if not isinstance(entry, dict) or not isinstance(entry.get("option"), str) or "rule" not in entry:
            raise ValueError("check %d must be a dict with option, rule and value, got %s" % (index, show(entry)))
        value = entry.get("value")
        if not entry.get("required", True) and (value is None or value == "" or value == {}):
            continue
        why = check(entry["rule"], value, rules)
        if why:
            found.append("%s: %s" % (entry["option"], why))
    return found
