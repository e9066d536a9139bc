# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Engine of the nccl_env module: the catalog's NCCL environment, optionally kept in an nccl.conf."""

from __future__ import annotations

import os
import tempfile

from ansible_collections.gpu_ops.cluster.plugins.module_utils import _gpudirect
from ansible_collections.gpu_ops.cluster.plugins.module_utils._plan import Plan


def _read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return None


def _lines(text):
    return None if text is None else text.splitlines()


def _write(module, path, text):
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        module.fail_json(msg="dest: the folder %s does not exist" % directory)
    fd, tmp = tempfile.mkstemp(prefix=".nccl.conf.", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
        module.atomic_move(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def run(module):
    params = module.params
    try:
        env, warnings = _gpudirect.nccl_environment(
            params["fabric"], gke_version=params["gke_version"], machine_type=params["machine_type"],
            interfaces=params["interfaces"], overrides=params["overrides"], ctrl_interface=params["ctrl_interface"])
        variant = _gpudirect.nccl_variant(params["fabric"], params["gke_version"])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    conf = _gpudirect.as_nccl_conf(env)
    result = dict(
        env=env,
        k8s_env=_gpudirect.as_k8s_env(env),
        exports=_gpudirect.as_exports(env),
        nccl_conf=conf,
        variant=variant,
        nccl_warnings=list(warnings),
    )
    plan = Plan()
    dest = params["dest"]
    if dest:
        if os.path.isdir(dest):
            module.fail_json(msg="dest: %s is a folder; give the path of the nccl.conf file" % dest)
        current = _read(dest)
        desired = dict(content=_lines(conf))
        change = None
        if current is None:
            change = plan.create("file", dest, desired)
        elif current != conf:
            change = plan.update("file", dest, dict(content=_lines(current)), desired, ["content"])
        if change is not None and not module.check_mode:
            _write(module, dest, conf)
        if os.path.exists(dest):
            file_args = module.load_file_common_arguments(dict(
                path=dest, mode=params["mode"], owner=params["owner"], group=params["group"]))
            attributes = {}
            if module.set_fs_attributes_if_different(file_args, False, diff=attributes):
                before, after = attributes.get("before", {}), attributes.get("after", {})
                if change is None:
                    plan.update("file", dest, dict(attributes=before), dict(attributes=after), ["attributes"])
                elif change.action == "update":
                    change.fields.append("attributes")
                    change.before["attributes"] = before
                    change.after["attributes"] = after
        result["dest"] = dest
    result.update(plan.result(diff=module._diff))  # pylint: disable=protected-access
    for message in warnings:
        module.warn(message)
    module.exit_json(**result)
