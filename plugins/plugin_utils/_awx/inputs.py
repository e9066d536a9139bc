# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""AWX inputs as the controller's API checks them, refused before any request (the awx_job_templates role).

Each check returns None or why not, as the rules of ``_k8s_names`` do (that module lists them in its RULES, so
roles reach them through apply's ``names`` entry point). Sources, ansible/awx tag 24.6.1:

- names: ``awx/main/models/base.py`` (``name = models.CharField(max_length=512)``); control characters are refused
  here as well, since they cannot be typed in the UI and break the names in job output;
- project URLs: ``awx/main/utils/common.py`` ``update_scm_url`` for scm_type git (schemes ssh, git, http, https,
  ftp, ftps, file; scp-like ``[user@]host:path``; a host for every scheme but file; user ``git`` for SSH to
  github.com and bitbucket.org);
- credential inputs: ``awx/main/models/credential/__init__.py`` (the fields of the Google Compute Engine, Microsoft
  Azure Resource Manager and OpenShift or Kubernetes API Bearer Token types) and ``awx/main/validators.py``
  (``validate_ssh_private_key``: a PEM private key of type RSA, DSA, EC, OPENSSH or none). Messages never show a
  secret input's value.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

NAME_MAX = 512
GIT_SCHEMES = ("ssh", "git", "git+ssh", "http", "https", "ftp", "ftps", "file")
SSH_USER_HOSTS = ("github.com", "bitbucket.org", "altssh.bitbucket.org")
PRIVATE_KEY_TYPES = ("RSA", "DSA", "EC", "OPENSSH", "")

_PEM_KEY = re.compile(r"-{4,} *BEGIN (?P<type>(?:[A-Z]+ )?)PRIVATE KEY *-{4,}\s*[A-Za-z0-9+/=\s:,-]+?\s*-{4,} *END (?P=type)PRIVATE KEY *-{4,}")
_GUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\Z")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+\Z")

# AWX credential type name -> {input: (check, what it must be)}; the checks below
CREDENTIAL_INPUTS = {
    "Google Compute Engine": {"username": ("email", "the service account's email address"),
                              "ssh_key_data": ("private_key", "a PEM private key (the private_key of the key file)")},
    "Microsoft Azure Resource Manager": {"subscription": ("guid", "a subscription ID (a GUID)")},
    "OpenShift or Kubernetes API Bearer Token": {"host": ("api_url", "the API server's URL (https://host[:port][/path])")},
}
REQUIRED_INPUTS = {
    "Google Compute Engine": ("username", "ssh_key_data"),
    "Microsoft Azure Resource Manager": ("subscription",),
    "OpenShift or Kubernetes API Bearer Token": ("host", "bearer_token"),
}


def _show(value, limit=80):
    text = ascii(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def name(value):
    """None when ``value`` can be the name of an AWX object: 1 to 512 characters, no control character."""
    if not isinstance(value, str) or not value.strip():
        return "%s is not a name (a non-empty string)" % _show(value)
    if len(value) > NAME_MAX:
        return "%s is %d characters long, at most %d" % (_show(value), len(value), NAME_MAX)
    if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in value):
        return "%s holds a control character" % _show(value)
    return None


def scm_url(value):
    """None when AWX takes ``value`` as a git project URL (update_scm_url), else why not."""
    if not isinstance(value, str) or not value.strip():
        return "%s is not a git URL" % _show(value)
    url = value.strip()
    if any(ord(c) < 33 for c in url):
        return "%s holds white space or a control character" % _show(value)
    if "://" not in url:
        if ":" in url:
            userpass, _at, hostpath = url.rpartition("@")
            if hostpath.startswith("[") and "]:" in hostpath:
                host, path = hostpath.split("]:", 1)
                host += "]"
            elif hostpath.count(":") > 1:
                return "%s is not a git URL (scp-like: [user@]host:path)" % _show(value)
            else:
                host, path = hostpath.split(":", 1)
            url = "git+ssh://%s" % "@".join(filter(None, [userpass, host + "/" + path]))
        else:
            url = "file://" + url if url.startswith("/") else "file:///" + url
    elif url.startswith("git+ssh://"):
        return "%s: AWX refuses the git+ssh:// scheme (write ssh:// or user@host:path)" % _show(value)
    parts = urlsplit(url)
    try:
        parts.port
    except ValueError:
        return "%s has an invalid port" % _show(value)
    if parts.scheme not in GIT_SCHEMES:
        return "%s: scheme %s is not one AWX clones git from (%s)" % (
            _show(value), _show(parts.scheme), ", ".join(s for s in GIT_SCHEMES if s != "git+ssh"))
    if parts.scheme == "file" and parts.netloc not in ("", "localhost"):
        return "%s: a file:// URL names no host but localhost" % _show(value)
    if parts.scheme != "file" and not parts.hostname:
        return "%s: a %s URL needs a host" % (_show(value), parts.scheme)
    if parts.scheme.endswith("ssh") and parts.hostname in SSH_USER_HOSTS and (parts.username or "") != "git":
        return "%s: SSH access to %s needs the user git (git@%s:...)" % (_show(value), parts.hostname, parts.hostname)
    return None


def _input_problem(check, value):
    if check == "private_key":
        match = _PEM_KEY.search(value) if isinstance(value, str) else None
        if not match or match.group("type").strip() not in PRIVATE_KEY_TYPES:
            return "is not %s"
        return None
    if not isinstance(value, str) or not value.strip():
        return "is not %s"
    if check == "guid":
        return None if _GUID.match(value.strip()) else "is not %s"
    if check == "email":
        return None if _EMAIL.match(value.strip()) else "is not %s"
    try:
        parts = urlsplit(value.strip())
        parts.port
    except ValueError:
        return "is not %s"
    return None if parts.scheme in ("https", "http") and parts.hostname else "is not %s"


def credential(value):
    """None when a credential ``{type: <AWX type name>, inputs: {...}}`` has inputs its type takes, else why not
    (the field names only: never a value)."""
    if not isinstance(value, dict):
        return "must be a dict of type and inputs"
    return "; ".join(credential_inputs(value.get("type"), value.get("inputs") or {})) or None


def credential_inputs(credential_type, inputs):
    """``"inputs.<field>: <why>"`` lines for the inputs of a credential of AWX type ``credential_type`` (its name).

    A type this module does not know is not judged. Values are never shown: credential inputs are secrets.
    """
    if not isinstance(inputs, dict):
        return ["inputs: must be a dict of the credential type's fields"]
    rules = CREDENTIAL_INPUTS.get(credential_type)
    if rules is None:
        return []
    found = ["inputs.%s: is required by the %s credential type" % (field, credential_type)
             for field in REQUIRED_INPUTS[credential_type] if inputs.get(field) in (None, "")]
    for field in sorted(rules):
        if inputs.get(field) in (None, ""):
            continue
        check, what = rules[field]
        why = _input_problem(check, inputs[field])
        if why:
            found.append("inputs.%s: %s" % (field, why % what))
    return found


# the AWX rules a role's checks may name (gpu_ops.cluster.k8s_name_problems takes them beside Kubernetes' own)
RULES = {
    "awx_name": name,
    "awx_scm_url": scm_url,
    "awx_credential": credential,
}
