# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Strict checks of filter arguments: what a filter cannot judge is an error naming the argument.

Each function returns the checked value (converted where the conversion cannot change its meaning,
for example the text ``"8"`` to 8) or raises ValueError ``"<argument>: <why>"``. Booleans are never
taken for numbers, nor text for booleans (``"no"`` is truthy in Python).
"""

from __future__ import annotations

import functools
import math

_MAX_SHOWN = 60


def _show(value):
    text = ascii(value)
    return text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN - 3] + "..."


def number(name, value, minimum=None, allow_none=False):
    """A finite int or float (numeric text accepted), at least ``minimum``."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or value is None:
        raise ValueError("%s: must be a number, got %s" % (name, _show(value)))
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise ValueError("%s: must be a number, got %s" % (name, _show(value)))
    if not isinstance(value, (int, float)):
        raise ValueError("%s: must be a number, got %s" % (name, type(value).__name__))
    if not math.isfinite(value):
        raise ValueError("%s: must be a finite number, got %s" % (name, value))
    if minimum is not None and value < minimum:
        raise ValueError("%s: must be at least %s, got %s" % (name, minimum, value))
    return value


def whole_number(name, value, minimum=None):
    """An int (whole-number text accepted), at least ``minimum``."""
    if isinstance(value, bool) or value is None:
        raise ValueError("%s: must be a whole number, got %s" % (name, _show(value)))
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        raise ValueError("%s: must be a whole number, got %s" % (name, _show(value)))
    if minimum is not None and value < minimum:
        raise ValueError("%s: must be at least %d, got %d" % (name, minimum, value))
    return value


def boolean(name, value):
    """A real boolean."""
    if not isinstance(value, bool):
        raise ValueError("%s: must be true or false, got %s" % (name, _show(value)))
    return value


def text(name, value, allow_none=False):
    """A non-empty string."""
    if value is None and allow_none:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValueError("%s: must be a non-empty string, got %s" % (name, _show(value)))
    return value


def version_text(name, value):
    """A version given as text (an unquoted 1.30 in YAML reads as the number 1.3)."""
    if value is None or isinstance(value, str):
        return value
    raise ValueError("%s: must be a string (quote it: an unquoted 1.30 reads as the number 1.3), got %s"
                     % (name, _show(value)))


def mapping(name, value, allow_none=True):
    """A dict (None allowed unless ``allow_none`` is false)."""
    if value is None and allow_none:
        return None
    if not isinstance(value, dict):
        raise ValueError("%s: must be a dict, got %s" % (name, type(value).__name__))
    return value


def objects(name, value):
    """A list whose every item is a dict (Kubernetes objects as k8s_info returns them)."""
    if not isinstance(value, (list, tuple)):
        raise ValueError("%s: must be a list of Kubernetes objects, got %s" % (name, type(value).__name__))
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise ValueError("%s[%d]: must be a Kubernetes object (a dict), got %s"
                             % (name, index, type(item).__name__))
    return value


def output_text(name, value, lines=True):
    """Command output: text, or (with ``lines``) a list of lines (stdout_lines). None is an error, not
    "nothing found"."""
    if value is None:
        raise ValueError("%s: is null - no output was captured (pass the command's stdout, not a missing variable)"
                         % name)
    if isinstance(value, (list, tuple)) and lines:
        if not all(isinstance(line, str) for line in value):
            raise ValueError("%s: a list of output lines must hold only strings" % name)
        return value
    if not isinstance(value, str):
        raise ValueError("%s: must be command output text, got %s" % (name, type(value).__name__))
    return value


def plain(value):
    """Templated values (Ansible's lazy containers, tagged strings) as plain dicts (text keys), lists and str.

    The engines test exact types and compare with ==, so filters hand them plain values.
    """
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, str):
        return str(value)
    return value


def filtered(_error, _filter, _function, *args, **kwargs):
    """``_function(*args, **kwargs)``; a ValueError or TypeError comes out as ``_error("<_filter>: <why>")``.

    ``_error`` is the filter's exception class (AnsibleFilterError), which module_utils cannot import.
    The underscores keep the names free for the keyword arguments of ``_function`` (``name=``).
    """
    try:
        return _function(*args, **kwargs)
    except (TypeError, ValueError) as exc:
        raise _error("%s: %s" % (_filter, exc)) from None


def errors_as(error):
    """Decorator of a filter: a ValueError or TypeError it raises comes out as ``error("<filter>: <why>")``."""
    def decorate(function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            return filtered(error, function.__name__, function, *args, **kwargs)
        return wrapper
    return decorate
