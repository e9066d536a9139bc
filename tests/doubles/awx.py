# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A strict, stateful double of the AWX (automation controller) REST API v2, the part awx.awx modules use.

Start it (in-process, from pytest)::

    from ansible_collections.gpu_ops.cluster.tests.doubles.awx import AwxDouble

    with AwxDouble(project_files=["playbooks/site.yml", "inventories/fleet"]) as awx:
        awx.url                     # "http://127.0.0.1:PORT" - controller_host
        awx.token                   # controller_oauthtoken (requests without it get 401)
        awx.module_defaults()       # {"group/awx.awx.controller": {...}} for a play
        awx.objects("job_templates")            # stored objects, as GET returns them
        awx.survey(job_template_id)             # the stored survey spec
        awx.launch_extra_vars(job_template_id, answers)   # the extra vars a launch would give the playbook
        awx.mutating_requests()     # [(method, path), ...] of POST/PATCH/PUT/DELETE

or as a process: ``python -m ansible_collections.gpu_ops.cluster.tests.doubles.awx PORT [PROJECT_FILE ...]``
(prints ``READY <url> token <token>``; SIGTERM stops it).

Endpoints (``/api/v2/``): ``ping``, ``config``, ``me``, ``organizations``, ``projects`` (+ ``project_updates``),
``credential_types`` (the built-in types below, read only), ``credentials``, ``inventories``,
``inventory_sources``, ``execution_environments``, ``job_templates`` with ``survey_spec`` and the ``credentials``
and ``instance_groups`` sublists (associate / disassociate), ``instance_groups`` and ``instances`` (read only: the
groups and nodes given to the constructor, as AWX lists them, with the ``instances`` sublist of a group),
``workflow_job_templates``, ``workflow_job_template_nodes`` (unique identifier per workflow, the job template they run;
``success_nodes`` / ``failure_nodes`` / ``always_nodes`` sublists) and ``unified_job_templates`` (job and workflow job
templates together, filtered by ``type``). Lists take exact-match filters on stored fields, ``or__<field>`` filters
(OR-ed together, AND-ed with the rest, as django-filter does in AWX), ``page``/``page_size`` and ``order_by``;
an unknown filter field is 400. Detail URLs take an id or a named URL (``name++organization``; credentials
``name++type name+kind++organization``; credential types ``name+kind``), unknown -> 404.

Rules enforced as AWX does (messages are AWX's):
- survey specs: exactly the checks of AWX's JobTemplateSurveySpec._validate_spec_data - name/description/spec
  present and typed, spec not empty, each question a dict with string type/question_name/variable and boolean
  required, unique variables, the seven question types, defaults of the question's type, integer min/max,
  choices for multiplechoice/multiselect, defaults among the choices (one for multiplechoice), ``$encrypted$``
  only for password questions that already have a default; string choices/defaults are normalised (blank lines
  dropped) and password defaults are stored encrypted and shown as ``$encrypted$``, as AWX does;
- foreign keys (organization, project, inventory, credential_type, credentials, source_project,
  execution_environment) must exist ("Invalid pk ... - object does not exist."); names are unique per
  organization (per credential type for credentials, per inventory for inventory sources);
- a job template's playbook must be one of its project's playbooks (``project_files`` ending in .yml/.yaml),
  an inventory source's ``source_path`` one of the project's files; a scm project needs ``scm_url``;
- credential inputs must be fields of the credential type, required inputs present, secret inputs shown as
  ``$encrypted$``; a job template takes one credential per type, of kind ssh/vault/cloud/net/kubernetes.
- Every response carries ``X-API-Product-Name: AWX`` and ``X-API-Product-Version`` (the modules check them).

What a launch does with a survey, without running a job (``launch_extra_vars``): AWX's
SurveyJobTemplateMixin._update_unified_job_kwargs (awx/main/models/mixins.py, tag 24.6.1) starts from the
template's extra_vars, adds every question's ``default`` that is not None (whether or not it was answered),
then the launch's answers; a required question missing from the answers is refused ("'x' value missing").

What it does not do: RBAC (the token is a superuser), running jobs, real project syncs (an update is
created already successful), hosts and groups, labels, notifications, schedules, launching workflows, capacity
accounting (an instance group's ``capacity`` is what it was given).
"""

from __future__ import annotations

import copy
import datetime
import json
import re
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, unquote, urlsplit

DEFAULT_TOKEN = "awx-double-token-7c2e"
API_VERSION = "24.6.1"
MUTATING = frozenset(("POST", "PUT", "PATCH", "DELETE"))
SURVEY_TYPES = {"text": (str,), "textarea": (str,), "password": (str,), "multiplechoice": (str,),
                "multiselect": (str,), "integer": (int,), "float": (float, int)}
ENCRYPTED = "$encrypted$"
ASSIGNABLE_KINDS = ("ssh", "vault", "cloud", "net", "kubernetes")


def _field(fid, label, secret=False, kind="string"):
    return {"id": fid, "label": label, "type": kind, "secret": secret}


# The built-in credential types a GPU job template binds (awx/main/models/credential/__init__.py).
BUILTIN_CREDENTIAL_TYPES = [
    {"name": "Machine", "kind": "ssh", "namespace": "ssh",
     "fields": [_field("username", "Username"), _field("password", "Password", True),
                _field("ssh_key_data", "SSH Private Key", True)], "required": []},
    {"name": "Source Control", "kind": "scm", "namespace": "scm",
     "fields": [_field("username", "Username"), _field("password", "Password", True),
                _field("ssh_key_data", "SCM Private Key", True)], "required": []},
    {"name": "Google Compute Engine", "kind": "cloud", "namespace": "gce",
     "fields": [_field("username", "Service Account Email Address"), _field("project", "Project"),
                _field("ssh_key_data", "RSA Private Key", True)], "required": ["username", "ssh_key_data"]},
    {"name": "Microsoft Azure Resource Manager", "kind": "cloud", "namespace": "azure_rm",
     "fields": [_field("subscription", "Subscription ID"), _field("username", "Username"),
                _field("password", "Password", True), _field("client", "Client ID"),
                _field("secret", "Client Secret", True), _field("tenant", "Tenant ID"),
                _field("cloud_environment", "Azure Cloud Environment")], "required": ["subscription"]},
    {"name": "OpenShift or Kubernetes API Bearer Token", "kind": "kubernetes", "namespace": "kubernetes_bearer_token",
     "fields": [_field("host", "OpenShift or Kubernetes API Endpoint"), _field("bearer_token", "API authentication bearer token", True),
                _field("verify_ssl", "Verify SSL", kind="boolean"), _field("ssl_ca_cert", "Certificate Authority data", True)],
     "required": ["host", "bearer_token"]},
]

# Stored fields of each collection with AWX's defaults (what GET returns for a field never set).
FIELDS = {
    "organizations": dict(description="", max_hosts=0, custom_virtualenv=None, default_environment=None),
    "projects": dict(description="", organization=None, scm_type="", scm_url="", scm_branch="", scm_refspec="",
                     scm_clean=False, scm_delete_on_update=False, scm_track_submodules=False,
                     scm_update_on_launch=False, scm_update_cache_timeout=0, allow_override=False, timeout=0,
                     credential=None, local_path="", custom_virtualenv=None, default_environment=None,
                     signature_validation_credential=None, scm_revision=""),
    "credentials": dict(description="", organization=None, credential_type=None, inputs={}),
    "inventories": dict(description="", organization=None, kind="", host_filter=None, variables="",
                        prevent_instance_group_fallback=False),
    "inventory_sources": dict(description="", inventory=None, source="", source_path="", source_vars="",
                              source_project=None, credential=None, execution_environment=None, overwrite=False,
                              overwrite_vars=False, custom_virtualenv=None, timeout=0, verbosity=1,
                              update_on_launch=False, update_cache_timeout=0, enabled_var="", enabled_value="",
                              host_filter="", scm_branch="", limit=""),
    "execution_environments": dict(description="", organization=None, image="", pull="", credential=None),
    "job_templates": dict(description="", organization=None, job_type="run", inventory=None, project=None,
                          playbook="", scm_branch="", forks=0, limit="", verbosity=0, extra_vars="", job_tags="",
                          force_handlers=False, skip_tags="", start_at_task="", timeout=0, use_fact_cache=False,
                          execution_environment=None, host_config_key="", ask_scm_branch_on_launch=False,
                          ask_diff_mode_on_launch=False, ask_variables_on_launch=False, ask_limit_on_launch=False,
                          ask_tags_on_launch=False, ask_skip_tags_on_launch=False, ask_job_type_on_launch=False,
                          ask_verbosity_on_launch=False, ask_inventory_on_launch=False,
                          ask_credential_on_launch=False, ask_execution_environment_on_launch=False,
                          ask_forks_on_launch=False, ask_instance_groups_on_launch=False,
                          ask_job_slice_count_on_launch=False, ask_labels_on_launch=False,
                          ask_timeout_on_launch=False, survey_enabled=False, become_enabled=False,
                          diff_mode=False, allow_simultaneous=False, custom_virtualenv=None, job_slice_count=1,
                          webhook_service="", webhook_credential=None, prevent_instance_group_fallback=False),
    "workflow_job_templates": dict(description="", organization=None, extra_vars="", survey_enabled=False,
                                   allow_simultaneous=False, ask_variables_on_launch=False, inventory=None, limit=None,
                                   scm_branch=None, ask_inventory_on_launch=False, ask_scm_branch_on_launch=False,
                                   ask_limit_on_launch=False, webhook_service="", webhook_credential=None,
                                   ask_labels_on_launch=False, ask_skip_tags_on_launch=False, ask_tags_on_launch=False,
                                   skip_tags=None, job_tags=None),
    "workflow_job_template_nodes": dict(workflow_job_template=None, unified_job_template=None, identifier="", extra_data={},
                                        inventory=None, scm_branch=None, job_type=None, job_tags=None, skip_tags=None,
                                        limit=None, diff_mode=None, verbosity=None, forks=None, job_slice_count=None,
                                        timeout=None, all_parents_must_converge=False, execution_environment=None),
}
# what AWX lists for an instance group and an instance (the constructor's values override these)
INSTANCE_GROUP_FIELDS = dict(capacity=0, consumed_capacity=0, percent_capacity_remaining=100.0, jobs_running=0,
                             jobs_total=0, is_container_group=False, credential=None, pod_spec_override="",
                             max_concurrent_jobs=0, max_forks=0, policy_instance_percentage=0,
                             policy_instance_minimum=0, policy_instance_list=[])
INSTANCE_FIELDS = dict(hostname="", node_type="execution", node_state="ready", capacity=0, enabled=True,
                       managed_by_policy=True, cpu_capacity=0, mem_capacity=0, capacity_adjustment="1.00",
                       jobs_running=0)
# sublists that associate objects of another collection: (collection, sublist) -> collection associated
ASSOCIATIONS = {("job_templates", "instance_groups"): "instance_groups",
                ("workflow_job_template_nodes", "success_nodes"): "workflow_job_template_nodes",
                ("workflow_job_template_nodes", "failure_nodes"): "workflow_job_template_nodes",
                ("workflow_job_template_nodes", "always_nodes"): "workflow_job_template_nodes"}
READ_ONLY = ("credential_types", "project_updates", "instance_groups", "instances", "unified_job_templates")
# field -> collection it refers to
FOREIGN_KEYS = {"organization": "organizations", "project": "projects", "inventory": "inventories",
                "credential_type": "credential_types", "credential": "credentials", "source_project": "projects",
                "execution_environment": "execution_environments", "default_environment": "execution_environments",
                "webhook_credential": "credentials", "signature_validation_credential": "credentials",
                "workflow_job_template": "workflow_job_templates"}
CHOICES = {("projects", "scm_type"): ("", "git", "svn", "insights", "archive"),
           ("inventories", "kind"): ("", "smart", "constructed"),
           ("inventory_sources", "source"): ("file", "constructed", "scm", "ec2", "gce", "azure_rm", "vmware",
                                             "satellite6", "openstack", "rhv", "controller", "insights",
                                             "terraform", "openshift_virtualization"),
           ("job_templates", "job_type"): ("run", "check"),
           ("job_templates", "webhook_service"): ("", "github", "gitlab", "bitbucket_dc")}
# what makes a name unique, besides the name
UNIQUE_WITH = {"organizations": (), "projects": ("organization",), "inventories": ("organization",),
               "credentials": ("organization", "credential_type"), "inventory_sources": ("inventory",),
               "execution_environments": ("organization",), "job_templates": ("organization",),
               "workflow_job_templates": ("organization",)}
VERBOSE = {"organizations": "Organization", "projects": "Project", "credentials": "Credential",
           "inventories": "Inventory", "inventory_sources": "Inventory source", "job_templates": "Job Template",
           "execution_environments": "Execution Environment", "workflow_job_templates": "Workflow job template"}
TYPE_OF = {"organizations": "organization", "projects": "project", "credentials": "credential",
           "credential_types": "credential_type", "inventories": "inventory", "inventory_sources": "inventory_source",
           "job_templates": "job_template", "execution_environments": "execution_environment",
           "project_updates": "project_update", "instance_groups": "instance_group", "instances": "instance",
           "workflow_job_templates": "workflow_job_template", "workflow_job_template_nodes": "workflow_job_template_node"}
LIST_PARAMS = frozenset(("page", "page_size", "order_by", "format"))


class ApiError(Exception):
    """An error answer: HTTP status and the JSON document AWX sends."""

    def __init__(self, status, document):
        super().__init__(json.dumps(document))
        self.status = status
        self.document = document


def _now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat().replace("+00:00", "Z")


def _survey_error(message):
    return ApiError(400, {"error": message})


def _lines(text):
    return "\n".join(line for line in text.splitlines() if line.strip() != "")


def validate_survey_spec(new_spec, old_spec):
    """AWX's checks of a survey spec POST; returns the spec as AWX stores it (ApiError when rejected)."""
    if not isinstance(new_spec, dict):
        raise _survey_error("Expected a JSON object for the survey spec.")
    spec = copy.deepcopy(new_spec)
    error = None
    for field, expect_type, label in (("name", str, "string"), ("description", str, "string"), ("spec", list, "list of items")):
        if field not in spec:
            error = "Field '%s' is missing from survey spec." % field
        elif not isinstance(spec[field], expect_type):
            error = "Expected %s for field '%s', received %s type." % (label, field, type(spec[field]).__name__)
    if isinstance(spec.get("spec"), list) and not spec["spec"]:
        error = "'spec' doesn't contain any items."
    if error:
        raise _survey_error(error)
    old_by_variable = {q.get("variable"): q for q in (old_spec or {}).get("spec", []) if isinstance(q, dict)}
    variables = set()
    for idx, item in enumerate(spec["spec"]):
        _validate_question(idx, item, variables, old_by_variable)
    return spec


def _validate_question(idx, item, variables, old_by_variable):
    if not isinstance(item, dict):
        raise _survey_error("Survey question %s is not a json object." % idx)
    for name in ("type", "question_name", "variable", "required"):
        if name not in item:
            raise _survey_error("'%s' missing from survey question %s" % (name, idx))
        kind, label = (bool, "boolean") if name == "required" else (str, "string")
        if not isinstance(item[name], kind):
            raise _survey_error("'%s' in survey question %s expected to be %s." % (name, idx, label))
    if item["variable"] in variables:
        raise _survey_error("'variable' '%s' duplicated in survey question %s." % (item["variable"], idx))
    variables.add(item["variable"])
    qtype = item["type"]
    if qtype not in SURVEY_TYPES:
        raise _survey_error("'%s' in survey question %s is not one of '%s' allowed question types."
                            % (qtype, idx, ", ".join(SURVEY_TYPES)))
    default = item.get("default")
    if "default" in item and default != "" and (not isinstance(default, SURVEY_TYPES[qtype]) or isinstance(default, bool)):
        label = qtype if qtype in ("integer", "float") else "string"
        raise _survey_error("Default value %s in survey question %s expected to be %s." % (default, idx, label))
    for key in ("min", "max"):
        if item.get(key) is not None and (not isinstance(item[key], int) or isinstance(item[key], bool)):
            raise _survey_error("The %s limit in survey question %s expected to be integer." % (key, idx))
    if qtype in ("multiplechoice", "multiselect"):
        _validate_choices(idx, item)
    _encrypt_default(idx, item, old_by_variable)


def _validate_choices(idx, item):
    if "choices" not in item:
        raise _survey_error("Survey question %s of type %s must specify choices." % (idx, item["type"]))
    if isinstance(item["choices"], str):
        item["choices"] = _lines(item["choices"])
    if "default" not in item:
        return
    if isinstance(item["default"], str):
        item["default"] = _lines(item["default"])
        defaults = item["default"].splitlines()
    else:
        defaults = item["default"]
    if item["type"] == "multiplechoice" and len(defaults) > 1:
        raise _survey_error("Multiple Choice (Single Select) can only have one default value.")
    if any(d not in item["choices"] for d in defaults):
        raise _survey_error("Default choice must be answered from the choices listed.")


def _encrypt_default(idx, item, old_by_variable):
    default = item.get("default")
    if isinstance(default, str) and default.startswith(ENCRYPTED):
        if item["type"] != "password":
            raise _survey_error("$encrypted$ is a reserved keyword for password question defaults, "
                                "survey question %s is type %s." % (idx, item["type"]))
        old_default = old_by_variable.get(item["variable"], {}).get("default")
        if not (isinstance(old_default, str) and (old_default.startswith(ENCRYPTED) or old_default == "")):
            raise _survey_error("$encrypted$ is a reserved keyword, may not be used for new default in position %s." % idx)
        item["default"] = old_default
    elif item["type"] == "password" and "default" in item:
        item["default"] = ENCRYPTED + "UTF8$AESCBC$" + str(default)[::-1]  # stored "encrypted", never shown


def _display_survey(spec):
    shown = copy.deepcopy(spec or {})
    for item in shown.get("spec", []):
        if item.get("type") == "password" and isinstance(item.get("default"), str) and item["default"]:
            item["default"] = ENCRYPTED
    return shown


class AwxDouble:
    """The double. See the module docstring."""

    def __init__(self, token=DEFAULT_TOKEN, project_files=(), page_size=25, instance_groups=None):
        self.token = token
        self.project_files = list(project_files)
        self.page_size = int(page_size)
        self.lock = threading.RLock()
        self.store = {name: {} for name in list(FIELDS) + ["credential_types", "project_updates", "instance_groups", "instances"]}
        self.associated = {}  # (collection, id, sublist) -> [ids]
        self.surveys = {}  # job template id -> stored spec
        self.jt_credentials = {}  # job template id -> [credential ids]
        self.requests = []
        self._next_id = 1
        self._server = None
        self.url = None
        self.port = None
        for definition in BUILTIN_CREDENTIAL_TYPES:
            self._insert("credential_types", dict(
                name=definition["name"], kind=definition["kind"], namespace=definition["namespace"], managed=True,
                description="", inputs={"fields": copy.deepcopy(definition["fields"]), "required": list(definition["required"])},
                injectors={}))
        self._insert("organizations", dict(FIELDS["organizations"], name="Default"))
        # AWX's own groups when none are given: controlplane and default, one hybrid node each (a one-node install)
        if instance_groups is None:
            instance_groups = [{"name": "controlplane", "instances": [{"hostname": "awx-1", "node_type": "hybrid", "capacity": 59}]},
                               {"name": "default", "instances": [{"hostname": "awx-1", "node_type": "hybrid", "capacity": 59}]}]
        for group in instance_groups:
            ids = []
            for node in group.get("instances", []):
                known = next((i for i in self.store["instances"].values() if i["hostname"] == node["hostname"]), None)
                ids.append((known or self._insert("instances", dict(INSTANCE_FIELDS, **node)))["id"])
            nodes = [self.store["instances"][i] for i in ids]
            fields = dict(INSTANCE_GROUP_FIELDS, capacity=sum(n["capacity"] for n in nodes if n["enabled"]))
            fields.update({k: v for k, v in group.items() if k != "instances"})
            self.associated[("instance_groups", self._insert("instance_groups", fields)["id"], "instances")] = ids

    # ------------------------------------------------------------------ lifecycle

    def start(self, port=0):
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler_class(self))
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = "http://127.0.0.1:%d" % self.port
        threading.Thread(target=self._server.serve_forever, kwargs=dict(poll_interval=0.05), name="awx-double",
                         daemon=True).start()
        return self

    def stop(self):
        server, self._server = self._server, None
        if server:
            server.shutdown()
            server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        del exc
        self.stop()

    def module_defaults(self):
        """module_defaults for the awx.awx modules of a play."""
        return {"group/awx.awx.controller": {"controller_host": self.url, "controller_oauthtoken": self.token,
                                             "validate_certs": False}}

    # ------------------------------------------------------------------ inspection

    def objects(self, collection):
        with self.lock:
            return [self._render(collection, obj) for obj in self.store[collection].values()]

    def find(self, collection, name):
        found = [o for o in self.objects(collection) if o.get("name") == name]
        assert len(found) == 1, "%d %s named %r" % (len(found), collection, name)
        return found[0]

    def survey(self, job_template_id):
        with self.lock:
            return _display_survey(self.surveys.get(job_template_id))

    def launch_extra_vars(self, job_template_id, answers=None):
        """The extra vars a launch with survey ``answers`` gives the playbook (see the docstring): the template's
        extra_vars, then each question's default that is not None, then the answers."""
        answers = dict(answers or {})
        with self.lock:
            template = self.store["job_templates"][job_template_id]
            spec = self.surveys.get(job_template_id) or {}
            extra = template.get("extra_vars") or ""
            extra_vars = (json.loads(extra) if extra.strip().startswith("{") else {}) if extra else {}
            if template.get("survey_enabled"):
                for item in spec.get("spec", []):
                    if item.get("required") and item["variable"] not in answers:
                        raise ApiError(400, {"variables_needed_to_start": ["'%s' value missing" % item["variable"]]})
                    if item.get("default") is not None:
                        extra_vars[item["variable"]] = item["default"]
            extra_vars.update(answers)
            return extra_vars

    def associated_names(self, collection, object_id, sublist):
        """The names (identifiers of workflow nodes) of what ``sublist`` of an object holds."""
        with self.lock:
            target = ASSOCIATIONS.get((collection, sublist), "instances")
            return [self.store[target][i].get("name", self.store[target][i].get("identifier", self.store[target][i].get("hostname")))
                    for i in self.associated.get((collection, object_id, sublist), [])]

    def credentials_of(self, job_template_id):
        with self.lock:
            return [self.store["credentials"][i]["name"] for i in self.jt_credentials.get(job_template_id, [])]

    def mutating_requests(self):
        with self.lock:
            return [(m, p) for m, p in self.requests if m in MUTATING]

    # ------------------------------------------------------------------ storage

    def _insert(self, collection, fields):
        obj = dict(fields, id=self._next_id, created=_now(), modified=_now())
        self._next_id += 1
        self.store[collection][obj["id"]] = obj
        return obj

    def _render(self, collection, obj):
        shown = copy.deepcopy(obj)
        url = "/api/v2/%s/%d/" % (collection, obj["id"])
        shown.update(type=TYPE_OF[collection], url=url, related={}, summary_fields={})
        if obj.get("organization") in self.store["organizations"]:
            org = self.store["organizations"][obj["organization"]]
            shown["summary_fields"]["organization"] = {"id": org["id"], "name": org["name"],
                                                       "description": org.get("description", "")}
        if collection == "credentials":
            ctype = self.store["credential_types"][obj["credential_type"]]
            secret = {f["id"] for f in ctype["inputs"]["fields"] if f.get("secret")}
            shown["inputs"] = {k: (ENCRYPTED if k in secret and v != "" else v) for k, v in obj["inputs"].items()}
            shown["kind"] = ctype["namespace"]
            shown["cloud"] = ctype["kind"] == "cloud"
            shown["summary_fields"]["credential_type"] = {"id": ctype["id"], "name": ctype["name"]}
        if collection == "job_templates":
            shown["related"].update(survey_spec=url + "survey_spec/", credentials=url + "credentials/")
            shown["summary_fields"]["credentials"] = [
                {"id": i, "name": self.store["credentials"][i]["name"]} for i in self.jt_credentials.get(obj["id"], [])]
        if collection == "instance_groups":
            shown["instances"] = len(self.associated.get(("instance_groups", obj["id"], "instances"), []))
            shown["related"].update(instances=url + "instances/")
        if collection in ("job_templates", "workflow_job_template_nodes"):
            shown["related"].update({sub: url + sub + "/" for (coll, sub) in ASSOCIATIONS if coll == collection})
        if collection == "projects":
            shown["related"].update(update=url + "update/", playbooks=url + "playbooks/")
            if obj.get("_current_update"):
                shown["summary_fields"]["current_update"] = {"id": obj["_current_update"], "status": "successful"}
        for key in [k for k in shown if k.startswith("_")]:
            del shown[key]
        return shown

    # ------------------------------------------------------------------ request handling

    def handle(self, method, raw_path, headers, body_bytes):
        parts = urlsplit(raw_path)
        path, query = parts.path, dict(parse_qsl(parts.query, keep_blank_values=True))
        with self.lock:
            self.requests.append((method, path))
            try:
                if headers.get("Authorization") != "Bearer %s" % self.token:
                    raise ApiError(401, {"detail": "Authentication credentials were not provided."})
                body = json.loads(body_bytes.decode("utf-8")) if body_bytes else {}
                return self._route(method, path, query, body)
            except ApiError as exc:
                return exc.status, exc.document
            except ValueError:
                return 400, {"detail": "JSON parse error - Expecting value"}

    def _route(self, method, path, query, body):
        match = re.match(r"^/api/v2/(?:(?P<coll>[a-z_]+)/(?:(?P<key>[^/]+)/(?:(?P<sub>[a-z_]+)/)?)?)?$", path)
        if not match:
            raise ApiError(404, {"detail": "Not found."})
        coll, key, sub = match.group("coll"), match.group("key"), match.group("sub")
        if coll in ("ping", "config", "me") and key is None and method == "GET":
            return 200, {"version": API_VERSION, "active_node": "awx-double", "ha": False, "instances": [],
                         "results": [{"id": 1, "username": "admin", "is_superuser": True}], "count": 1}
        if coll == "unified_job_templates" and key is None and method == "GET":
            return 200, self._unified(path, query)
        if coll not in self.store:
            raise ApiError(404, {"detail": "Not found."})
        if key is None:
            if method == "GET":
                return 200, self._list(coll, path, query)
            if method == "POST" and coll not in READ_ONLY:
                return 201, self._create(coll, body)
            raise ApiError(405, {"detail": 'Method "%s" not allowed.' % method})
        obj = self._lookup(coll, unquote(key))
        if sub is None:
            return self._detail(coll, obj, method, body)
        return self._sub(coll, obj, sub, method, query, body)

    def _list(self, coll, path, query, objects=None):
        objects = list(self.store[coll].values()) if objects is None else objects
        ors = {k[4:]: v for k, v in query.items() if k.startswith("or__")}
        ands = {k: v for k, v in query.items() if not k.startswith("or__") and k not in LIST_PARAMS}
        for field in list(ors) + list(ands):
            allowed = FIELDS.get(coll) or {"instance_groups": INSTANCE_GROUP_FIELDS, "instances": INSTANCE_FIELDS}.get(coll, {})
            if field not in ("id", "name", "kind", "namespace", "managed", "type") and field not in allowed:
                raise ApiError(400, {"detail": "Cannot resolve keyword '%s' into field." % field})
        selected = [o for o in objects if all(_matches(o, k, v) for k, v in ands.items())
                    and (not ors or any(_matches(o, k, v) for k, v in ors.items()))]
        order = query.get("order_by", "id")
        selected.sort(key=lambda o: (str(o.get(order.lstrip("-"))) if order.lstrip("-") != "id" else o["id"]),
                      reverse=order.startswith("-"))
        size = int(query.get("page_size", self.page_size))
        page = int(query.get("page", 1))
        chunk = selected[(page - 1) * size:page * size]
        rest = dict((k, v) for k, v in query.items() if k != "page")

        def page_url(number):
            return path + "?" + "&".join("%s=%s" % kv for kv in sorted(dict(rest, page=number).items()))

        return {"count": len(selected), "next": page_url(page + 1) if page * size < len(selected) else None,
                "previous": page_url(page - 1) if page > 1 else None,
                "results": [self._render(coll, o) for o in chunk]}

    def _lookup(self, coll, key):
        if key.isdigit():
            obj = self.store[coll].get(int(key))
        else:
            obj = next((o for o in self.store[coll].values() if self._named_url(coll, o) == key), None)
        if obj is None:
            raise ApiError(404, {"detail": "Not found."})
        return obj

    def _named_url(self, coll, obj):
        org = self.store["organizations"].get(obj.get("organization"), {}).get("name", "")
        if coll == "credential_types":
            return "%s+%s" % (obj["name"], obj["kind"])
        if coll == "credentials":
            ctype = self.store["credential_types"][obj["credential_type"]]
            return "%s++%s+%s++%s" % (obj["name"], ctype["name"], ctype["kind"], org)
        if coll in ("projects", "inventories", "job_templates", "execution_environments", "workflow_job_templates"):
            return "%s++%s" % (obj["name"], org)
        if coll == "instances":
            return obj["hostname"]
        return obj.get("name")

    def _detail(self, coll, obj, method, body):
        if method == "GET":
            return 200, self._render(coll, obj)
        if coll in READ_ONLY:
            raise ApiError(405, {"detail": 'Method "%s" not allowed.' % method})
        if method in ("PATCH", "PUT"):
            return 200, self._write(coll, body, obj)
        if method == "DELETE":
            del self.store[coll][obj["id"]]
            if coll == "job_templates":
                self.surveys.pop(obj["id"], None)
            return 204, None
        raise ApiError(405, {"detail": 'Method "%s" not allowed.' % method})

    def _sub(self, coll, obj, sub, method, query, body):
        if coll == "job_templates" and sub == "survey_spec":
            if method == "GET":
                return 200, _display_survey(self.surveys.get(obj["id"]))
            if method == "POST":
                self.surveys[obj["id"]] = validate_survey_spec(body, self.surveys.get(obj["id"]))
                return 200, None
            if method == "DELETE":
                self.surveys.pop(obj["id"], None)
                return 200, None
        if coll == "job_templates" and sub == "credentials":
            if method == "GET":
                attached = [self.store["credentials"][i] for i in self.jt_credentials.get(obj["id"], [])]
                return 200, self._list("credentials", "/api/v2/job_templates/%d/credentials/" % obj["id"], query, attached)
            if method == "POST":
                self._associate(obj, body)
                return 204, None
        if (coll, sub) in ASSOCIATIONS or (coll, sub) == ("instance_groups", "instances"):
            target = ASSOCIATIONS.get((coll, sub), "instances")
            held = self.associated.setdefault((coll, obj["id"], sub), [])
            if method == "GET":
                return 200, self._list(target, "/api/v2/%s/%d/%s/" % (coll, obj["id"], sub), query,
                                       [self.store[target][i] for i in held])
            if method == "POST" and coll != "instance_groups":
                if not isinstance(body.get("id"), int) or body["id"] not in self.store[target]:
                    raise ApiError(400, {"msg": "Related object not found."})
                if body.get("disassociate"):
                    if body["id"] in held:
                        held.remove(body["id"])
                elif body["id"] not in held:
                    if coll == "workflow_job_template_nodes" and (
                            self.store[target][body["id"]]["workflow_job_template"] != obj["workflow_job_template"] or body["id"] == obj["id"]):
                        raise ApiError(400, {"Error": "Relationship not allowed."})
                    held.append(body["id"])
                return 204, None
        if coll == "projects" and sub == "playbooks" and method == "GET":
            return 200, self._playbooks()
        raise ApiError(404, {"detail": "Not found."})

    def _associate(self, template, body):
        if not isinstance(body.get("id"), int):
            raise ApiError(400, {"msg": "\"id\" field must be an integer."})
        attached = self.jt_credentials.setdefault(template["id"], [])
        credential = self.store["credentials"].get(body["id"])
        if credential is None:
            raise ApiError(400, {"msg": "Related object not found."})
        if body.get("disassociate"):
            if body["id"] in attached:
                attached.remove(body["id"])
            return
        if body["id"] in attached:
            return
        ctype = self.store["credential_types"][credential["credential_type"]]
        if any(self.store["credentials"][i]["credential_type"] == ctype["id"] for i in attached):
            raise ApiError(400, {"error": "Cannot assign multiple %s credentials." % ctype["name"]})
        if ctype["kind"] not in ASSIGNABLE_KINDS:
            raise ApiError(400, {"error": "Cannot assign a Credential of kind `%s`." % ctype["kind"]})
        attached.append(body["id"])

    def _playbooks(self):
        return sorted(f for f in self.project_files if f.endswith((".yml", ".yaml")))

    # ------------------------------------------------------------------ create / update

    def _create(self, coll, body):
        return self._write(coll, body, None)

    def _write(self, coll, body, existing):
        if not isinstance(body, dict):
            raise ApiError(400, {"detail": "Invalid data. Expected a dictionary."})
        # DRF ignores fields a serializer does not have; keep only the known ones
        known = {k: v for k, v in body.items() if k in FIELDS[coll] or (k == "name" and coll != "workflow_job_template_nodes")}
        merged = dict(FIELDS[coll], **(existing or {}))
        merged.update(copy.deepcopy(known))
        errors = self._field_errors(coll, merged, known, existing)
        if errors:
            raise ApiError(400, errors)
        self._check_unique(coll, merged, existing)
        if existing is None:
            obj = self._insert(coll, merged)
        else:
            existing.update(merged, modified=_now())
            obj = existing
        if coll == "projects" and obj["scm_type"] and (existing is None or "scm_url" in known or "scm_branch" in known):
            update = self._insert("project_updates", dict(name=obj["name"], project=obj["id"], status="successful"))
            obj["_current_update"] = update["id"]
            obj["scm_revision"] = "0123456789abcdef0123456789abcdef01234567"
        return self._render(coll, obj)

    def _field_errors(self, coll, merged, known, existing):
        errors = {}
        if coll != "workflow_job_template_nodes" and (not isinstance(merged.get("name"), str) or not merged["name"].strip()):
            errors["name"] = ["This field is required." if existing is None and "name" not in known
                              else "This field may not be blank."]
        for field, value in known.items():
            target = FOREIGN_KEYS.get(field)
            if target and value is not None and (not isinstance(value, int) or value not in self.store[target]):
                errors[field] = ['Invalid pk "%s" - object does not exist.' % value]
            allowed = CHOICES.get((coll, field))
            if allowed and value not in allowed:
                errors[field] = ['"%s" is not a valid choice.' % value]
        if errors:
            return errors
        check = getattr(self, "_check_" + coll, None)
        return check(merged, known) if check else {}

    def _check_projects(self, merged, known):
        del known
        if merged["organization"] is None:
            return {"organization": ["This field is required."]}
        if merged["scm_type"] and not merged["scm_url"]:
            return {"scm_url": ["SCM URL is required."]}
        return {}

    def _check_inventories(self, merged, known):
        del known
        return {"organization": ["This field is required."]} if merged["organization"] is None else {}

    def _check_credentials(self, merged, known):
        ctype = self.store["credential_types"].get(merged["credential_type"])
        if ctype is None:
            return {"credential_type": ["This field is required."]}
        inputs = merged["inputs"] if isinstance(merged["inputs"], dict) else None
        if inputs is None:
            return {"inputs": ["Must be a valid JSON object."]}
        fields = {f["id"]: f for f in ctype["inputs"]["fields"]}
        unknown = sorted(set(inputs) - set(fields))
        if unknown:
            return {"inputs": {unknown[0]: ["Additional properties are not allowed (%s was unexpected)" % repr(unknown[0])]}}
        missing = [f for f in ctype["inputs"]["required"] if inputs.get(f) in (None, "")]
        if missing:
            return {"inputs": {f: ["required for %s" % ctype["name"]] for f in missing}}
        if "inputs" in known and merged.get("id"):
            # "$encrypted$" sent back keeps the stored secret, as AWX does
            old = self.store["credentials"][merged["id"]]["inputs"]
            merged["inputs"] = {k: (old.get(k, "") if v == ENCRYPTED else v) for k, v in inputs.items()}
        return {}

    def _check_inventory_sources(self, merged, known):
        del known
        if merged["inventory"] is None:
            return {"inventory": ["This field is required."]}
        if merged["source"] == "scm":
            if merged["source_project"] is None:
                return {"source_project": ["Project required for scm type sources."]}
            if merged["source_path"] not in self.project_files:
                return {"source_path": ['Invalid inventory file path "%s" for this project.' % merged["source_path"]]}
        return {}

    def _check_job_templates(self, merged, known):
        del known
        if merged["project"] is None:
            return {"project": ["This field is required."]}
        if merged["inventory"] is None and not merged["ask_inventory_on_launch"]:
            return {"inventory": ["Job Template must provide 'inventory' or allow prompting for it."]}
        if merged["playbook"] not in self._playbooks():
            return {"playbook": ["Playbook not found for project."]}
        if merged["organization"] is None:
            merged["organization"] = self.store["projects"][merged["project"]]["organization"]
        return {}

    def _check_workflow_job_templates(self, merged, known):
        del known
        return {"organization": ["This field is required."]} if merged["organization"] is None else {}

    def _check_workflow_job_template_nodes(self, merged, known):
        del known
        if merged["workflow_job_template"] is None:
            return {"workflow_job_template": ["This field is required."]}
        if not isinstance(merged["unified_job_template"], int) or not any(
                merged["unified_job_template"] in self.store[c] for c in ("job_templates", "workflow_job_templates")):
            return {"unified_job_template": ['Invalid pk "%s" - object does not exist.' % merged["unified_job_template"]]}
        if not isinstance(merged["extra_data"], dict):
            return {"extra_data": ["Must be a valid JSON or YAML dictionary."]}
        return {}

    def _unified(self, path, query):
        kinds = {"job_template": "job_templates", "workflow_job_template": "workflow_job_templates"}
        wanted = query.pop("type", None)
        if wanted is not None and wanted not in kinds:
            return {"count": 0, "next": None, "previous": None, "results": []}
        listed = []
        for kind, coll in kinds.items():
            if wanted in (None, kind):
                listed.extend(self._list(coll, path, dict(query, page_size=10 ** 6))["results"])
        return {"count": len(listed), "next": None, "previous": None, "results": listed}

    def _check_unique(self, coll, merged, existing):
        if coll == "workflow_job_template_nodes":
            for other in self.store[coll].values():
                if other is not existing and other["workflow_job_template"] == merged["workflow_job_template"] \
                        and merged["identifier"] and other["identifier"] == merged["identifier"]:
                    raise ApiError(400, {"__all__": ["Workflow job template node with this Workflow job template and"
                                                     " Identifier already exists."]})
            return
        scope = UNIQUE_WITH.get(coll, ())
        for other in self.store[coll].values():
            if other is existing or other["name"] != merged["name"]:
                continue
            if all(other.get(f) == merged.get(f) for f in scope):
                if scope:
                    what = "(%s)" % ", ".join(["Name"] + [f.replace("_", " ").title() for f in scope])
                    raise ApiError(400, {"__all__": ["%s with this %s combination already exists." % (VERBOSE[coll], what)]})
                raise ApiError(400, {"name": ["%s with this Name already exists." % VERBOSE[coll]]})


def _matches(obj, field, value):
    actual = obj.get(field)
    if isinstance(actual, bool):
        return str(actual).lower() == str(value).lower()
    if actual is None:
        return value in ("", "None", "null")
    return str(actual) == str(value)


def _handler_class(double):
    def answer(handler):
        size = int(handler.headers.get("Content-Length") or 0)
        status, document = double.handle(handler.command, handler.path, handler.headers,
                                         handler.rfile.read(size) if size else b"")
        payload = json.dumps(document).encode("utf-8") if document is not None else b""
        handler.send_response(status)
        headers = {"Content-Type": "application/json", "Content-Length": str(len(payload)),
                   # awx.awx compares these with its own version
                   "X-API-Product-Name": "AWX", "X-API-Product-Version": API_VERSION}
        for key in headers:
            handler.send_header(key, headers[key])
        handler.end_headers()
        handler.wfile.write(payload)

    return type("AwxHandler", (BaseHTTPRequestHandler,), dict(
        protocol_version="HTTP/1.1", disable_nagle_algorithm=True,
        log_message=lambda self, *args: None,
        do_GET=answer, do_POST=answer, do_PUT=answer, do_PATCH=answer, do_DELETE=answer))


if __name__ == "__main__":
    # a standalone double: python -m ...tests.doubles.awx PORT [PROJECT_FILE ...]
    _standalone = AwxDouble(project_files=sys.argv[2:]).start(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    sys.stdout.write("READY %s token %s\n" % (_standalone.url, _standalone.token))
    sys.stdout.flush()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    _standalone.stop()
