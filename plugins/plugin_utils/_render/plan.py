# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The plan summary of a render folder: what a run would create, change and delete, for a person.

``summarize(render_dir, hosts)`` reads what render mode wrote (README "What make demo writes") and returns
``headline`` (one line of counts), ``markdown`` (the text of ``PLAN.md``), ``files`` (the plan's files,
hidden ones left out) and ``counts``. It reads, never writes; role ``render_notice`` (finish) writes
``PLAN.md`` and prints the headline.

What it reads:

- ``requests/NNN-<api>-<method>-<resource>.json``: one cloud API write each. The action comes from the method
  (``POST`` creates, ``PUT`` creates: render mode plans against an empty project; ``PATCH`` and a ``POST`` to
  a ``:verb`` or ``set...`` URL change; ``DELETE`` deletes), the resource kind from the URL's collection
  (``.../nodePools`` -> node pool), the name from the body (``name``, or the ``name`` of its one object) or
  the URL's last segment.
- ``manifests/<step>/NN-[delete-]<kind>-<name>.yaml``: Kubernetes objects (kind, name, namespace from the
  object; ``delete-`` marks an object to delete).
- ``charts/<step>/<release>.yaml``: Helm releases (chart, version, namespace, state).
- ``checks/gpu_hosts/<host>/``: a bare-metal host's ``mig-plan.json`` (a table per GPU), ``mps.json``
  and ``nccl.conf``; other ``checks/<step>/`` folders are what a verification step compares (counted).
- ``nccl/`` (the NCCL environment) and ``awx/`` (AWX objects).
- ``.gpu_ops_render_hosts/<host>.txt``: the index the writers append to (one path relative to the render
  folder per line; ``#`` lines are comments), which tells whose file is whose. A file no index names goes
  to the run's only host, else to a section of its own.

Long lists are cut: at most ``MAX_NAMES`` names per group, the rest counted.
"""

from __future__ import annotations

import json
import os
import re

import yaml

PLAN_FILE = "PLAN.md"
INDEX_DIR = ".gpu_ops_render_hosts"
MAX_NAMES = 6
RUN_WIDE = "(run-wide)"

_ACTION_WORDS = (("create", "create"), ("change", "change"), ("delete", "delete"))
_CHANGE_VERB = re.compile(r"^(set[A-Z]\w*|update\w*|patch\w*)\Z")


# ------------------------------------------------------------------ reading


def _read_text(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def _read_yaml(path):
    try:
        return yaml.safe_load(_read_text(path))
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return None


def _read_json(path):
    try:
        return json.loads(_read_text(path))
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def plan_files(render_dir):
    """The plan's files, relative to ``render_dir``, sorted: hidden files and folders and PLAN.md left out."""
    found = []
    for root, dirs, files in os.walk(render_dir):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in files:
            if name.startswith("."):
                continue
            rel = os.path.relpath(os.path.join(root, name), render_dir).replace(os.sep, "/")
            if rel != PLAN_FILE:
                found.append(rel)
    return sorted(found)


def read_index(render_dir):
    """``{relative path: host}`` from ``.gpu_ops_render_hosts/<host>.txt`` (the last host to name a file wins)."""
    folder = os.path.join(render_dir, INDEX_DIR)
    owners = {}
    if not os.path.isdir(folder):
        return owners
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".txt"):
            continue
        host = name[:-len(".txt")]
        try:
            lines = _read_text(os.path.join(folder, name)).splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        for line in lines:
            line = line.strip()
            if line and not line.startswith("#"):
                owners[os.path.normpath(line).replace(os.sep, "/")] = host
    return owners


def attribute(files, owners, hosts):
    """``{host: [files]}`` in host order: the index's owner, the host folder of ``checks/gpu_hosts/<host>/``,
    else the run's only host (of ``hosts`` or, when it names none, of the index), else ``RUN_WIDE``."""
    run_hosts = [h for h in hosts if h != "localhost"] or sorted(set(owners.values()))
    by_host = {}
    for rel in files:
        parts = rel.split("/")
        if rel in owners:
            host = owners[rel]
        elif parts[:2] == ["checks", "gpu_hosts"] and len(parts) > 3:
            host = parts[2]
        elif len(run_hosts) == 1:
            host = run_hosts[0]
        else:
            host = RUN_WIDE
        by_host.setdefault(host, []).append(rel)
    order = [h for h in run_hosts if h in by_host] + sorted(h for h in by_host if h not in run_hosts and h != RUN_WIDE)
    return [(h, by_host[h]) for h in order + ([RUN_WIDE] if RUN_WIDE in by_host else [])]


def record(render_dir, host, paths):
    """Append ``paths`` (absolute, or relative to ``render_dir``) to ``host``'s index; the paths outside
    ``render_dir`` are left out. Returns the relative paths recorded. One file per host, so hosts that run
    in parallel never write the same file."""
    root = os.path.realpath(render_dir)
    names = []
    for path in paths or []:
        full = os.path.realpath(os.path.join(root, path))
        if full.startswith(root + os.sep):
            names.append(os.path.relpath(full, root).replace(os.sep, "/"))
    if names and re.match(r"^[A-Za-z0-9_.:@-]+\Z", host or "") and not host.startswith("."):
        folder = os.path.join(root, INDEX_DIR)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, host + ".txt"), "a", encoding="utf-8") as handle:
            handle.write("".join(name + "\n" for name in names))
        return names
    return []


# ------------------------------------------------------------------ cloud requests


def _words(camel):
    """``nodePools`` -> ``node pool``, ``subnetworks`` -> ``subnetwork``."""
    text = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", camel).lower()
    if text.endswith("ies"):
        return text[:-3] + "y"
    if text.endswith("sses"):
        return text[:-2]
    return text[:-1] if text.endswith("s") and not text.endswith("ss") else text


def cloud_request(document, fallback_name=""):
    """``(action, kind, name, api)`` of one recorded request (``create``, ``change`` or ``delete``)."""
    document = document if isinstance(document, dict) else {}
    method = str(document.get("method") or "").upper()
    url = str(document.get("url") or "")
    body = document.get("body")
    path = re.sub(r"^[a-z]+://[^/]+", "", url.split("?", 1)[0])
    segments = [s for s in path.split("/") if s]
    verb = ""
    if segments and ":" in segments[-1]:
        segments[-1], verb = segments[-1].split(":", 1)
    if method == "DELETE":
        action = "delete"
    elif method == "PATCH" or verb or (method == "POST" and segments and _CHANGE_VERB.match(segments[-1])):
        action = "change"
    elif method in ("POST", "PUT"):
        action = "create"
    else:
        action = "change"
    if action == "change" and segments and _CHANGE_VERB.match(segments[-1]) and len(segments) >= 3:
        collection, name = segments[-3], segments[-2]
    elif method == "POST" and action == "create":
        collection, name = (segments[-1] if segments else "resource"), _body_name(body)
    else:
        collection = segments[-2] if len(segments) >= 2 else "resource"
        name = segments[-1] if segments else ""
    if method == "POST" and action == "create" and not name:
        name = fallback_name
    kind = _words(collection)
    if verb:
        kind = "%s (%s)" % (kind, verb)
    elif action == "change" and segments and _CHANGE_VERB.match(segments[-1]):
        kind = "%s (%s)" % (kind, segments[-1])
    return action, kind, name or "?", str(document.get("api") or "")


def _body_name(body):
    if not isinstance(body, dict):
        return ""
    if isinstance(body.get("name"), str):
        return body["name"]
    inner = [v for v in body.values() if isinstance(v, dict) and isinstance(v.get("name"), str)]
    return inner[0]["name"] if len(inner) == 1 else ""


# ------------------------------------------------------------------ Kubernetes objects and Helm releases


_MANIFEST_NAME = re.compile(r"^\d+-(delete-)?(?P<kind>[a-z0-9]+)-(?P<name>.+)\.ya?ml\Z")


def manifest(render_dir, rel):
    """``(step, state, kind, name, namespace)`` of one rendered object."""
    parts = rel.split("/")
    step = parts[1] if len(parts) > 2 else ""
    base = parts[-1]
    state = "absent" if re.match(r"^\d+-delete-", base) else "present"
    match = _MANIFEST_NAME.match(base)
    kind, name = (match.group("kind"), match.group("name")) if match else ("object", base)
    document = _read_yaml(os.path.join(render_dir, rel))
    namespace = ""
    if isinstance(document, dict):
        kind = str(document.get("kind") or kind)
        metadata = document.get("metadata") if isinstance(document.get("metadata"), dict) else {}
        name = str(metadata.get("name") or name)
        namespace = str(metadata.get("namespace") or "")
    return step, state, kind, name, namespace


def chart(render_dir, rel):
    """``(step, state, release, chart, version, namespace)`` of one rendered Helm release."""
    parts = rel.split("/")
    step = parts[1] if len(parts) > 2 else ""
    document = _read_yaml(os.path.join(render_dir, rel))
    document = document if isinstance(document, dict) else {}
    release = str(document.get("release_name") or os.path.splitext(parts[-1])[0])
    return (step, str(document.get("state") or "present"), release, str(document.get("chart_ref") or "?"),
            str(document.get("chart_version") or "?"), str(document.get("release_namespace") or ""))


# ------------------------------------------------------------------ bare-metal hosts


def _instances_text(instances):
    """``2× 1g.10gb, 1× 3g.40gb (3 CI)``: the GPU instances of one GPU, by profile in placement order."""
    counts = []
    for instance in sorted(instances, key=lambda i: (i.get("start") is None, i.get("start") or 0)):
        profile = str(instance.get("profile") or "?")
        cis = [c.get("slices") for c in instance.get("compute_instances") or []]
        label = profile if len(cis) <= 1 else "%s (%d compute instances)" % (profile, len(cis))
        for entry in counts:
            if entry[0] == label:
                entry[1] += 1
                break
        else:
            counts.append([label, 1])
    return ", ".join("%d× %s" % (n, label) for label, n in counts) or "-"


_MIG_KINDS = {"gpu_instance": ("GPU instance", "GPU instances"), "compute_instance": ("compute instance", "compute instances")}


def _change_text(action, kind, count):
    """``create 4 GPU instances`` of one GPU; ``update MIG mode`` (one per GPU, no count)."""
    if kind == "mig_mode":
        return "%s MIG mode" % action
    one, many = _MIG_KINDS.get(kind, (str(kind).replace("_", " "),) * 2)
    return "%s %d %s" % (action, count, one if count == 1 else many)


def mig_rows(plan):
    """Table rows ``(GPUs, model, MIG mode, instances, changes)``; consecutive GPUs that are alike share a row."""
    gpus = plan.get("gpus") if isinstance(plan, dict) else None
    changes = plan.get("changes") if isinstance(plan, dict) else None
    per_gpu = {}
    for change in changes or []:
        if not isinstance(change, dict):
            continue
        match = re.match(r"^gpu(\d+)", str(change.get("name") or ""))
        if match:
            key = (str(change.get("action")), str(change.get("kind")))
            per_gpu.setdefault(int(match.group(1)), {}).setdefault(key, 0)
            per_gpu[int(match.group(1))][key] += 1
    rows = []
    for gpu in gpus or []:
        if not isinstance(gpu, dict):
            continue
        index = gpu.get("index")
        mode = "on" if gpu.get("mig_mode_pending", gpu.get("mig_mode_current")) else "off"
        done = per_gpu.get(index, {})
        change = ", ".join(_change_text(a, k, done[(a, k)]) for a, k in sorted(done)) or "none"
        row = [str(gpu.get("model") or gpu.get("name") or "?"), mode, _instances_text(gpu.get("instances") or []), change]
        follows = isinstance(index, int) and bool(rows) and rows[-1][0][1] == index - 1
        if follows and rows[-1][1:] == row:
            rows[-1][0][1] = index
        else:
            rows.append([[index, index]] + row)
    return [("%s" % r[0][0] if r[0][0] == r[0][1] else "%s-%s" % tuple(r[0]),) + tuple(r[1:]) for r in rows]


def mig_counts(plan):
    """``{(action, kind): n}`` of a MIG plan's changes."""
    counts = {}
    for change in (plan.get("changes") if isinstance(plan, dict) else None) or []:
        if isinstance(change, dict):
            key = (str(change.get("action")), str(change.get("kind")))
            counts[key] = counts.get(key, 0) + 1
    return counts


def mps_text(settings):
    """One line of a host's MPS control daemon settings."""
    if not isinstance(settings, dict):
        return "unreadable"
    parts = ["GPUs %s" % (",".join(str(d) for d in settings.get("visible_devices") or []) or "all")]
    if settings.get("active_thread_percentage") is not None:
        parts.append("active threads %s%%" % settings["active_thread_percentage"])
    limits = settings.get("pinned_device_mem_limit")
    if isinstance(limits, dict) and limits:
        parts.append("pinned memory %s" % ",".join("%s=%s" % kv for kv in sorted(limits.items())))
    if "exclusive_process" in settings:
        parts.append("EXCLUSIVE_PROCESS %s" % ("yes" if settings["exclusive_process"] else "no"))
    if settings.get("mig"):
        parts.append("one daemon per MIG device")
    return "; ".join(parts)


def nccl_variables(render_dir, rel):
    """The ``NAME=value`` lines of an nccl.conf."""
    try:
        lines = _read_text(os.path.join(render_dir, rel)).splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    return [line.strip() for line in lines if "=" in line and not line.strip().startswith("#")]


# ------------------------------------------------------------------ one host


def _cut(names, limit=MAX_NAMES):
    names = list(names)
    shown = ", ".join("`%s`" % n for n in names[:limit])
    return shown + (", … %d more" % (len(names) - limit) if len(names) > limit else "")


def _by_kind(items):
    counts = {}
    for kind in items:
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join("%d %s" % (n, kind) for kind, n in counts.items())


def host_plan(render_dir, files):
    """What the files of one host plan: a dict of sections and counts."""
    plan = dict(requests=[], objects=[], releases=[], mig={}, mps={}, nccl={}, checks={}, awx=[], other=[])
    for rel in files:
        parts = rel.split("/")
        top = parts[0]
        if top == "requests" and rel.endswith(".json"):
            fallback = re.sub(r"^\d+-[^-]+-[^-]+-", "", os.path.splitext(parts[-1])[0])
            plan["requests"].append(cloud_request(_read_json(os.path.join(render_dir, rel)), fallback) + (rel,))
        elif top == "manifests" and len(parts) == 3:
            plan["objects"].append(manifest(render_dir, rel))
        elif top == "charts" and len(parts) == 3:
            plan["releases"].append(chart(render_dir, rel))
        elif parts[:2] == ["checks", "gpu_hosts"] and len(parts) == 4:
            name = parts[3]
            if name == "mig-plan.json":
                plan["mig"][parts[2]] = _read_json(os.path.join(render_dir, rel))
            elif name == "mps.json":
                plan["mps"][parts[2]] = _read_json(os.path.join(render_dir, rel))
            elif name == "nccl.conf":
                plan["nccl"][rel] = nccl_variables(render_dir, rel)
            else:
                plan["checks"].setdefault("gpu_hosts/%s" % parts[2], []).append(name)
        elif top == "checks" and len(parts) >= 3:
            plan["checks"].setdefault(parts[1], []).append("/".join(parts[2:]))
        elif top == "nccl":
            if parts[-1] == "nccl.conf":
                plan["nccl"][rel] = nccl_variables(render_dir, rel)
            else:
                plan["nccl"].setdefault(rel, None)
        elif top == "awx":
            plan["awx"].append(rel)
        else:
            plan["other"].append(rel)
    return plan


def host_counts(plan):
    """The headline's numbers of one host's plan."""
    counts = dict(cloud_create=0, cloud_change=0, cloud_delete=0, k8s_apply=0, k8s_delete=0, k8s_steps=set(),
                  helm_install=0, helm_delete=0, mig_create=0, mig_delete=0, mig_gpus=0, mig_hosts=0, mps_hosts=0,
                  awx_objects=0)
    for action, _kind, _name, _api, _rel in plan["requests"]:
        counts["cloud_" + action] += 1
    for step, state, _kind, _name, _ns in plan["objects"]:
        counts["k8s_delete" if state == "absent" else "k8s_apply"] += 1
        if state != "absent":
            counts["k8s_steps"].add(step)
    for _step, state, _release, _chart, _version, _ns in plan["releases"]:
        counts["helm_delete" if state == "absent" else "helm_install"] += 1
    for mig in plan["mig"].values():
        numbers = mig_counts(mig)
        counts["mig_create"] += numbers.get(("create", "gpu_instance"), 0)
        counts["mig_delete"] += numbers.get(("delete", "gpu_instance"), 0)
        gpus = len([g for g in (mig or {}).get("gpus") or [] if isinstance(g, dict) and g.get("instances")])
        counts["mig_gpus"] += gpus
        counts["mig_hosts"] += 1 if gpus or numbers else 0
    counts["mps_hosts"] += len(plan["mps"])
    counts["awx_objects"] += len(plan["awx"])
    return counts


def _plural(n, one, many=None):
    return "%d %s" % (n, one if n == 1 else (many or one + "s"))


def host_markdown(host, plan):
    """The Markdown section of one host."""
    lines = ["## %s" % (host if host != RUN_WIDE else "Files of no single host"), ""]
    if plan["requests"]:
        lines.append("**Cloud requests** (`requests/`, in the order they would be sent):")
        for word, action in _ACTION_WORDS:
            group = [r for r in plan["requests"] if r[0] == action]
            if not group:
                continue
            kinds = []
            for _a, kind, _n, _api, _r in group:
                if kind not in kinds:
                    kinds.append(kind)
            lines.append("- %s %d:" % (word, len(group)))
            for kind in kinds:
                names = [r[2] for r in group if r[1] == kind]
                lines.append("  - %s: %s" % (_plural(len(names), kind), _cut(names)))
        lines.append("")
    if plan["objects"]:
        steps = sorted(set((obj[0], obj[1]) for obj in plan["objects"]))
        lines.append("**Kubernetes objects** (`manifests/<step>/`, in apply order):")
        lines.append("")
        lines.append("| step | action | objects | names |")
        lines.append("| --- | --- | --- | --- |")
        for step, state in steps:
            group = [o for o in plan["objects"] if o[0] == step and o[1] == state]
            names = ["%s/%s%s" % (o[2], o[3], " (ns %s)" % o[4] if o[4] else "") for o in group]
            action = "delete" if state == "absent" else "apply"
            lines.append("| `%s` | %s | %s | %s |" % (step, action, _by_kind(o[2] for o in group), _cut(names, 4)))
        lines.append("")
    if plan["releases"]:
        lines.append("**Helm releases** (`charts/<step>/`):")
        for step, state, release, chart_ref, version, namespace in plan["releases"]:
            lines.append("- %s `%s`: chart `%s` %s in namespace `%s` (step `%s`)" % (
                "uninstall" if state == "absent" else "install", release, chart_ref, version, namespace or "default", step))
        lines.append("")
    for name, mig in sorted(plan["mig"].items()):
        numbers = mig_counts(mig)
        summary = ", ".join(("%s MIG mode on %s" % (a, _plural(n, "GPU"))) if k == "mig_mode" else
                            "%s %d %s" % (a, n, _MIG_KINDS.get(k, (k.replace("_", " "),) * 2)[n != 1])
                            for (a, k), n in sorted(numbers.items())) or "no change"
        lines.append("**MIG geometry** (`checks/gpu_hosts/%s/mig-plan.json`): %s" % (name, summary))
        lines.append("")
        lines.append("| GPU | model | MIG | GPU instances | changes |")
        lines.append("| --- | --- | --- | --- | --- |")
        for row in mig_rows(mig):
            lines.append("| %s |" % " | ".join(row))
        lines.append("")
    for name, settings in sorted(plan["mps"].items()):
        lines.append("**MPS control daemon** (`checks/gpu_hosts/%s/mps.json`): %s" % (name, mps_text(settings)))
        lines.append("")
    if plan["nccl"]:
        lines.append("**NCCL environment:**")
        for rel, variables in sorted(plan["nccl"].items()):
            if variables is None:
                lines.append("- `%s`" % rel)
            else:
                lines.append("- `%s`: %s" % (rel, _plural(len(variables), "variable") + (
                    " (%s)" % _cut(variables, 3) if variables else "")))
        lines.append("")
    if plan["checks"]:
        lines.append("**Verification expectations** (`checks/`): %s" % "; ".join(
            "`%s` %s" % (step, _cut(names, 3)) for step, names in sorted(plan["checks"].items())))
        lines.append("")
    if plan["awx"]:
        lines.append("**AWX objects** (`awx/`): %s" % _cut([os.path.basename(r) for r in plan["awx"]]))
        lines.append("")
    if plan["other"]:
        lines.append("**Other files:** %s" % _cut(plan["other"]))
        lines.append("")
    return lines


# ------------------------------------------------------------------ the run


def headline(counts):
    """``creates 26 cloud resources, applies 23 Kubernetes objects in 4 steps, ..., deletes 0``."""
    parts = []
    if counts["cloud_create"]:
        parts.append("creates %s" % _plural(counts["cloud_create"], "cloud resource"))
    if counts["cloud_change"]:
        parts.append("changes %s" % _plural(counts["cloud_change"], "cloud resource"))
    if counts["k8s_apply"]:
        parts.append("applies %s in %s" % (_plural(counts["k8s_apply"], "Kubernetes object"), _plural(counts["k8s_steps"], "step")))
    if counts["helm_install"]:
        parts.append("installs %s" % _plural(counts["helm_install"], "Helm release"))
    if counts["mig_hosts"] and (counts["mig_create"] or counts["mig_gpus"]):
        parts.append("creates %s on %s of %s" % (
            _plural(counts["mig_create"], "MIG instance"), _plural(counts["mig_gpus"], "GPU"), _plural(counts["mig_hosts"], "host")))
    if counts["mps_hosts"]:
        parts.append("configures MPS on %s" % _plural(counts["mps_hosts"], "host"))
    if counts.get("awx_objects"):
        parts.append("creates or updates %s" % _plural(counts["awx_objects"], "AWX object"))
    deleted = [(counts["cloud_delete"], "cloud resource"), (counts["k8s_delete"], "Kubernetes object"),
               (counts["helm_delete"], "Helm release"), (counts["mig_delete"], "MIG instance")]
    total = sum(n for n, dummy in deleted)
    parts.append("deletes %d" % total + (" (%s)" % ", ".join(_plural(n, w) for n, w in deleted if n) if total else ""))
    if len(parts) == 1 and not total:
        return "plans nothing to create or change, deletes 0"
    return ", ".join(parts)


def summarize(render_dir, hosts=()):
    """``dict(headline, markdown, files, counts)`` of the plan in ``render_dir`` (see the module docstring)."""
    files = plan_files(render_dir)
    sections = attribute(files, read_index(render_dir), list(hosts))
    total = dict(cloud_create=0, cloud_change=0, cloud_delete=0, k8s_apply=0, k8s_delete=0, k8s_steps=0,
                 helm_install=0, helm_delete=0, mig_create=0, mig_delete=0, mig_gpus=0, mig_hosts=0, mps_hosts=0,
                 awx_objects=0)
    body = []
    for host, host_files in sections:
        plan = host_plan(render_dir, host_files)
        for key, value in host_counts(plan).items():
            total[key] += len(value) if isinstance(value, set) else value
        body.extend(host_markdown(host, plan))
    line = headline(total)
    markdown = ["# Render plan", "",
                "Render mode: nothing was created, changed or deleted. This run %s." % line, "",
                "%s in `%s` (this summary: `%s`). Run again without `gpu_ops_render_dir` to apply it." % (
                    _plural(len(files), "file"), render_dir, PLAN_FILE), ""]
    if not files:
        markdown.extend(["The render wrote no file.", ""])
    markdown.extend(body)
    while markdown and not markdown[-1]:
        markdown.pop()
    return dict(headline=line, markdown="\n".join(markdown) + "\n", files=len(files), counts=total)
