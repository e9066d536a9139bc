# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""What the controller already holds under the names of a setup, judged before the awx_job_templates role writes.

The awx.awx modules (tag 24.6.1) find an organization's project, inventories and job templates by name *and*
organization, but ``awx.awx.job_template`` resolves its ``inventory`` and ``credentials`` by name alone
(``resolve_name_to_id``), which fails with "returned 2 items" as soon as two organizations hold the name. So:

- the organization named by the setup does not exist, but the setup's project, inventories or credentials exist in
  another organization: that is a renamed ``awx_job_templates_organization``. Creating the new organization would
  copy the project and inventories into it and then fail at the first job template; the organization is renamed in
  AWX instead (``awx.awx.organization`` ``new_name``: the objects keep their ids, job history and RBAC), or the old
  name is kept. Nothing is created: the user decides;
- an inventory or credential name of the setup exists in another organization (a second setup, or someone else's
  objects): the job templates could not name it, so it is refused naming the option to change.

Input: the objects the role read (GET lists, as the API returns them), keyed by endpoint. Output: one line per
problem, naming the variable, what exists and how to proceed; never a credential's inputs.
"""

from __future__ import annotations


def _org_name(obj, names):
    summary = (obj.get("summary_fields") or {}).get("organization") or {}
    org = obj.get("organization")
    return summary.get("name") or names.get(org) or ("id %s" % org if org is not None else "(none)")


def _foreign(objects, wanted_ids, names):
    """{object name: sorted organization names} of the objects outside the wanted organization."""
    found = {}
    for obj in objects or []:
        if obj.get("organization") not in wanted_ids:
            found.setdefault(obj.get("name"), set()).add(_org_name(obj, names))
    return {name: sorted(orgs) for name, orgs in found.items()}


def conflicts(existing, organization, project, inventories, credentials):
    """Problems of a setup (``organization``, ``project`` name, ``inventories`` and ``credentials`` names, in the
    order of their options) against ``existing`` ({endpoint: [objects]}: organizations, projects, inventories,
    credentials, as read by name). [] when the role can go on."""
    existing = existing or {}
    orgs = existing.get("organizations") or []
    names = {o.get("id"): o.get("name") for o in orgs}
    wanted_ids = {o.get("id") for o in orgs if o.get("name") == organization}
    projects = _foreign([p for p in existing.get("projects") or [] if p.get("name") == project], wanted_ids, names)
    foreign_inventories = _foreign(existing.get("inventories"), wanted_ids, names)
    foreign_credentials = _foreign(existing.get("credentials"), wanted_ids, names)
    if not wanted_ids:
        held = (["project %s" % project] if project in projects else []) + [
            "inventory %s" % name for name in inventories if name in foreign_inventories] + [
            "credential %s" % name for name in credentials if name in foreign_credentials]
        if held:
            elsewhere = sorted({org for found in (projects, foreign_inventories, foreign_credentials)
                                for orgs in found.values() for org in orgs})
            old = elsewhere[0] if len(elsewhere) == 1 else "<old name>"
            return ["awx_job_templates_organization: %s is not an organization in AWX, but this setup's %s already exist "
                    "in organization %s: going on would create a second project and inventory in %s, then fail at the "
                    "first job template (awx.awx.job_template finds inventories and credentials by name alone). To "
                    "rename the organization, rename it in AWX first (awx.awx.organization with name: %s and "
                    "new_name: %s, or the UI; its objects, job history and permissions stay), then run again; to keep "
                    "it, set awx_job_templates_organization: %s"
                    % (organization, ", ".join(held), ", ".join(elsewhere), organization, old, organization, old)]
    problems = []
    for option, kind, wanted, foreign in (
            ("awx_job_templates_inventories", "inventory", inventories, foreign_inventories),
            ("awx_job_templates_credentials", "credential", credentials, foreign_credentials)):
        for index, name in enumerate(wanted):
            if name in foreign:
                problems.append("%s[%d].name: %s %s also exists in organization %s, and awx.awx.job_template finds %s "
                                "by name alone (it would fail with 'returned 2 items'): choose a name no other "
                                "organization uses, or remove or rename the other %s"
                                % (option, index, kind, name, ", ".join(foreign[name]), "inventories" if kind == "inventory"
                                   else "credentials", kind))
    return problems
