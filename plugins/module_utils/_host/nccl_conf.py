# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""Engine of the nccl_env module: the catalog's NCCL environment, optionally kept in an nccl.conf."""

from __future__ import annotations

import grp
import os
import pwd
import re
import tempfile

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import nccl
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import EngineError
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.plan import Plan


def _read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return None


def _lines(text):
    return None if text is None else text.splitlines()


# ansible.builtin.file's symbolic modes: comma-separated [ugoa]*[-+=]([rwxXst]*|[ugo])
_SYMBOLIC_MODE = re.compile(r"^[ugoa]*[-+=](?:[rwxXst]*|[ugo])(?:,[ugoa]*[-+=](?:[rwxXst]*|[ugo]))*\Z")
_CONF_LINE = re.compile(r"^(?:#[^\x00-\x1f\x7f]*|[A-Za-z_][A-Za-z0-9_]*=[^\x00-\x1f\x7f]*)\Z")


def _mode_problem(mode):
    """Why ``mode`` is not a file mode ansible.builtin.file would take, or None."""
    if isinstance(mode, bool):
        return "must be an octal string such as '0644' or a symbolic mode such as 'u=rw,go=r', got %s" % mode
    if isinstance(mode, int):
        return None if 0 <= mode <= 0o7777 else "%d is out of range (0 to 07777)" % mode
    if not isinstance(mode, str) or not mode.strip():
        return "must be an octal string such as '0644' or a symbolic mode such as 'u=rw,go=r'"
    if mode.isdigit():
        if not re.match(r"^[0-7]{1,5}\Z", mode) or int(mode, 8) > 0o7777:
            return "%r is not an octal mode (digits 0-7, at most 07777)" % mode
        return None
    if not _SYMBOLIC_MODE.match(mode):
        return "%r is neither an octal mode ('0644') nor a symbolic mode ('u=rw,go=r')" % mode
    return None


def _owner_problems(params):
    problems = []
    for option, lookup in (("owner", pwd.getpwnam), ("group", grp.getgrnam)):
        value = params[option]
        if value is None or value.isdigit():
            continue
        try:
            lookup(value)
        except KeyError:
            problems.append("%s: %r does not exist on this host" % (option, value))
    return problems


def check_dest(params, conf):
    """Every reason O(dest) cannot be written as asked, before anything is written."""
    dest = params["dest"]
    problems = []
    if os.path.isdir(dest):
        problems.append("dest: %s is a folder; give the path of the nccl.conf file" % dest)
    elif not os.path.isdir(os.path.dirname(dest) or "."):
        problems.append("dest: the folder %s does not exist" % (os.path.dirname(dest) or "."))
    why = _mode_problem(params["mode"])
    if why:
        problems.append("mode: %s" % why)
    problems.extend(_owner_problems(params))
    for number, line in enumerate(conf.splitlines(), 1):
        if not _CONF_LINE.match(line):
            problems.append("overrides: nccl.conf line %d would not be KEY=value on one printable line" % number)
    return problems


def _write(files, path, text):
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".nccl.conf.", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
        files.atomic_move(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def run(params, context):
    """Entry point of the nccl_env module (the contract of ``_core.contract``)."""
    try:
        env, warnings = nccl.nccl_environment(
            params["fabric"], gke_version=params["gke_version"], machine_type=params["machine_type"],
            interfaces=params["interfaces"], overrides=params["overrides"], ctrl_interface=params["ctrl_interface"])
        variant = nccl.nccl_variant(params["fabric"], params["gke_version"])
    except ValueError as exc:
        raise EngineError(str(exc))
    conf = nccl.as_nccl_conf(env)
    result = dict(
        env=env,
        k8s_env=nccl.as_k8s_env(env),
        exports=nccl.as_exports(env),
        nccl_conf=conf,
        variant=variant,
        nccl_warnings=list(warnings),
    )
    plan = Plan()
    dest = params["dest"]
    if dest:
        problems = check_dest(params, conf)
        if problems:
            raise EngineError("; ".join(problems) + " (nothing was written)", problems=problems)
        current = _read(dest)
        desired = dict(content=_lines(conf))
        change = None
        if current is None:
            change = plan.create("file", dest, desired)
        elif current != conf:
            change = plan.update("file", dest, dict(content=_lines(current)), desired, ["content"])
        if change is not None:
            change.text = (current or "", conf)
        if change is not None and not context.check_mode:
            _write(context.files, dest, conf)
        if os.path.exists(dest):
            file_args = context.files.load_file_common_arguments(dict(
                path=dest, mode=params["mode"], owner=params["owner"], group=params["group"]))
            attributes = {}
            if context.files.set_fs_attributes_if_different(file_args, False, diff=attributes):
                before, after = attributes.get("before", {}), attributes.get("after", {})
                if change is None:
                    plan.update("file", dest, dict(attributes=before), dict(attributes=after), ["attributes"])
                elif change.action == "update":
                    change.fields.append("attributes")
                    change.before["attributes"] = before
                    change.after["attributes"] = after
        result["dest"] = dest
    result.update(plan.result(diff=context.diff))
    for message in warnings:
        context.warn(message)
    return result
