# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvidia-smi filters: the parsers in plugins/module_utils/_parsers/nvsmi.py.

Documentation: plugins/filter/nvsmi_parse.yml, nvsmi_listing_problems.yml.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core import inputs as _inputs
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core.lazy import engine

_nvsmi = engine("ansible_collections.gpu_ops.cluster.plugins.module_utils._parsers.nvsmi")


@_inputs.errors_as(AnsibleFilterError)
def nvsmi_parse(text, kind="list", fields=None):
    """Parse nvidia-smi output of the given kind (list, lgip, lgipp, lgi, lci, csv, xml, messages)."""
    if not isinstance(kind, str) or kind not in _nvsmi.PARSERS:
        raise ValueError("kind %r is not one of %s" % (kind, ", ".join(sorted(_nvsmi.PARSERS))))
    # null is not "no GPUs": it is a missing capture (an undefined register, a skipped task)
    _inputs.output_text("input", text)
    if kind == "csv":
        return _nvsmi.parse_query_csv(text, fields)
    if fields is not None:
        raise ValueError("fields only applies to kind=csv")
    return _nvsmi.PARSERS[kind](text)


@_inputs.errors_as(AnsibleFilterError)
def nvsmi_listing_problems(text, profile, count=1, exact=False):
    """Why an nvidia-smi -L listing does not show the expected MIG devices ([] when it does)."""
    return _nvsmi.listing_problems(_inputs.output_text("input", text), _inputs.text("profile", profile),
                                   _inputs.whole_number("count", count, minimum=0), _inputs.boolean("exact", exact))


class FilterModule:
    """nvidia-smi filters."""

    def filters(self):
        return {
            "nvsmi_parse": nvsmi_parse,
            "nvsmi_listing_problems": nvsmi_listing_problems,
        }
