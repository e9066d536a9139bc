# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Input checks shared by the operator plans: every refusal is an ``OperatorInputError`` naming the option.
"""

from __future__ import annotations

import copy
import re

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog.gpu_operator import chart_series
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._k8s import names as _k8s_names


class OperatorInputError(ValueError):
    """Input a chart version, platform or the GPU hosts cannot take; the message names the option."""


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------

def require(condition, message, *args):
    if not condition:
        raise OperatorInputError(message % args if args else message)


def _catalog_chart(catalog, chart, version, shown=lambda series: series):
    """(series, entry) of chart ``version`` in ``catalog``; refuses a version outside it, listing the known series."""
    series = chart_series(version)
    require(series in catalog, "chart_version: %s chart %r is not in the catalog (known: %s)", chart, version,
            ", ".join("%s.x (pinned %s)" % (shown(s), e["pinned"]) for s, e in catalog.items()))
    return series, catalog[series]


def _dns_label(option, value):
    """A namespace or short name, checked by the collection's one name check (_k8s_names)."""
    why = _k8s_names.check("dns1123_label", value)
    require(why is None, "%s: %s", option, why)
    return value


def _dns_subdomain(option, value):
    why = _k8s_names.check("dns1123_subdomain", value)
    require(why is None, "%s: %s", option, why)
    return value


def _images(option, values):
    """Refuse chart values or an image spec whose image fields (image, repository, tag/version) are no valid
    reference, naming each field's path under ``option`` (the rule of _k8s_names.chart_values_images)."""
    found = _k8s_names.image_field_problems(values if isinstance(values, dict) else {}, option)
    require(not found, "%s", "; ".join(found))
    return values


def _choice(option, value, choices):
    require(value in choices, "%s: %r is not one of: %s", option, value, ", ".join(choices))
    return value


def _flatten(values, prefix=""):
    """Dotted paths of every leaf of a values dict (a dict value is walked, anything else is a leaf)."""
    paths = []
    for key, value in (values or {}).items():
        path = "%s.%s" % (prefix, key) if prefix else str(key)
        if isinstance(value, dict) and value:
            paths.extend(_flatten(value, path))
        else:
            paths.append(path)
    return paths


def _accepted(path, keys):
    parts = path.split(".")
    return any(".".join(parts[:index]) in keys for index in range(1, len(parts) + 1))


def _merge(base, extra):
    """A copy of ``base`` with ``extra`` merged in recursively (dicts merge, anything else replaces)."""
    result = copy.deepcopy(base)
    for key, value in (extra or {}).items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = _merge(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def _version_tuple(text):
    return tuple(int(part) for part in re.findall(r"\d+", str(text or ""))[:3])


def _chart_source(options, chart, repo_url):
    """chart_ref and chart_repo_url of a release: the upstream chart unless set; an empty (not unset) repository
    URL means chart_ref is a local chart path or an OCI reference (the apply role then leaves the URL out)."""
    url = options.get("chart_repo_url")
    return {"chart_ref": options.get("chart_ref") or chart, "chart_repo_url": repo_url if url is None else str(url)}


def _pinned(version, pinned, prefix=""):
    """A full chart version as given (v25.3.4), or the series' pinned release for a series (v25.3)."""
    text = str(version).strip().lstrip("v")
    return prefix + text if text.count(".") == 2 else pinned


def _hosts_with(hosts, test):
    return sorted(h for h, f in (hosts or {}).items() if test(f or {}))
