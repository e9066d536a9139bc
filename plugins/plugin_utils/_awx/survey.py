# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""AWX/AAP job template surveys generated from roles' meta/argument_specs.yml.

A survey answer reaches the playbook as an extra variable of the JSON type the question type gives:
text, textarea, password and multiplechoice give a string, integer an int, float a number and
multiselect a list of strings. An option is asked only where that value passes the role's argument
validation AND means the same to the role's tasks:

========================================  =========================================================
argument spec option                      survey question
========================================  =========================================================
str / path, no choices                    text (password when the option is no_log)
str with choices                          multiplechoice ('' is not offered: leaving the question
                                          unanswered is how a user keeps the role's default)
int                                       integer
float                                     float
list of str with choices                  multiselect
bool, dict, raw, list (other), any option not asked: a bool answered "false" would arrive as a
with suboptions                           non-empty string, and structures belong in group_vars
                                          (``unaskable_reason`` says why for each)
========================================  =========================================================

No question carries a default, and none is required, so a survey never overrides the inventory unless the
user answers. What AWX does with a survey (awx/main/models/mixins.py at tag 24.6.1):

- ``SurveyJobTemplateMixin._update_unified_job_kwargs``: every question whose ``default`` is not None (an
  empty string included) and passes the question's validation is added to the job's extra vars, whether
  or not the launcher answered; runtime answers are added on top. Extra vars override every inventory
  variable, so a question with the role's default would replace each cluster's own value with it.
- ``_survey_element_validation``: a ``required`` question missing from the launch is an error
  ("'x' value missing"), so a required question forces an answer (an override) on every launch.
- The UI (awx/ui/src/components/LaunchPrompt/steps/useSurveyStep.js ``getInitialValues``) pre-fills
  a question with its default, and awx/ui/src/util/prompt/getSurveyValues.js leaves blank answers
  ('' or an empty multiselect) out of the extra vars.

So a question without a default that is left blank sends nothing: the inventory's value holds, else the
role's default. The role's default is named in the question's description, and a role's required
option is checked by the role's own argument validation. description -> question_name (first sentence)
and question_description.
"""

from __future__ import annotations

import re

VARIABLE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
QUESTION_NAME_MAX = 80


def _description(option):
    text = option.get("description") or ""
    if isinstance(text, (list, tuple)):
        text = " ".join(str(part) for part in text)
    # ansible-doc markup (C(x), O(x), V(x), ...) reads better as plain text in a form
    text = re.sub(r"\b[A-Z]\(([^()]*)\)", r"\1", str(text))
    return " ".join(text.split())


def _question_name(variable, description):
    first = re.split(r"(?<=[.;:])\s", description, maxsplit=1)[0].rstrip(".;:") if description else ""
    if not first:
        return variable
    if len(first) > QUESTION_NAME_MAX:
        first = first[:QUESTION_NAME_MAX - 3].rstrip() + "..."
    return first


def _with_unanswered(description, option):
    """The description plus what an unanswered question means (no default is sent: see the docstring)."""
    if option.get("required"):
        keep = "the inventory's value (the role requires one)"
    elif option.get("no_log") or option.get("default") in (None, "", []):
        keep = "the inventory's value, else the role's default"
    else:
        default = option["default"]
        shown = ", ".join(str(d) for d in default) if isinstance(default, (list, tuple)) else str(default)
        keep = "the inventory's value, else the role's default (%s)" % shown
    return ("%s Unanswered: %s." % (description, keep)).strip()


def unaskable_reason(option):
    """Why an argument spec option cannot be a survey question (None when it can)."""
    kind = option.get("type", "str")
    if "options" in option:
        return "has suboptions (set it in the inventory)"
    if kind in ("str", "path", "int", "float"):
        return None
    if kind == "list" and option.get("elements", "str") == "str" and option.get("choices"):
        return None
    if kind == "bool":
        return "bool: an AWX answer would be the string 'true'/'false', not a boolean"
    return "type %s%s has no AWX question type (set it in the inventory)" % (
        kind, " of %s" % option["elements"] if option.get("elements") else "")


def question(variable, option):
    """One survey question for argument spec option ``variable`` (ValueError when it cannot be asked)."""
    if not VARIABLE_RE.match(variable or ""):
        raise ValueError("%r is not a valid variable name" % (variable,))
    reason = unaskable_reason(option)
    if reason:
        raise ValueError("option %s cannot be a survey question: %s" % (variable, reason))
    kind = option.get("type", "str")
    description = _description(option)
    item = {
        "question_name": _question_name(variable, description),
        "question_description": description,
        "variable": variable,
        # never required: a required question must be answered on every launch, overriding the inventory
        "required": False,
    }
    choices = [str(c) for c in option.get("choices") or [] if str(c) != ""]
    if kind == "list":
        item["type"] = "multiselect"
        item["choices"] = choices
    elif choices:
        item["type"] = "multiplechoice"
        item["choices"] = choices
    elif kind == "int":
        item["type"] = "integer"
    elif kind == "float":
        item["type"] = "float"
    elif option.get("no_log"):
        item["type"] = "password"
    else:
        item["type"] = "text"
    item["question_description"] = _with_unanswered(description, option)
    return item


def entry_point_options(argument_specs, entry_point="main"):
    """The options of one entry point of a loaded meta/argument_specs.yml."""
    specs = (argument_specs or {}).get("argument_specs", argument_specs) or {}
    if entry_point not in specs:
        raise ValueError("no entry point %r (the file has: %s)" % (entry_point, ", ".join(sorted(specs)) or "none"))
    return specs[entry_point].get("options") or {}


def questions(argument_specs, entry_point="main", options=None, role="role"):
    """Survey questions for ``options`` of an entry point (all askable options, in file order, when None).

    Naming an option that does not exist or cannot be asked is an error, so a renamed or retyped role
    option breaks the generation instead of silently dropping a question.
    """
    spec_options = entry_point_options(argument_specs, entry_point)
    if options is None:
        return [question(name, opt) for name, opt in spec_options.items() if unaskable_reason(opt) is None]
    found = []
    for name in options:
        if name not in spec_options:
            raise ValueError("%s (entry point %s) has no option %r; it has: %s"
                             % (role, entry_point, name, ", ".join(sorted(spec_options))))
        try:
            found.append(question(name, spec_options[name]))
        except ValueError as exc:
            raise ValueError("%s (entry point %s): %s" % (role, entry_point, exc))
    return found


def survey_spec(sources, name, description=""):
    """A whole AWX survey spec from ``sources``: [{argument_specs, role, entry_point, options}, ...].

    A variable that two sources ask is asked once (the first source wins). No question at all gives {}
    (what the job_template module takes for "no survey").
    """
    spec, seen = [], set()
    for source in sources or []:
        for item in questions(source.get("argument_specs"), source.get("entry_point") or "main",
                              source.get("options"), source.get("role") or "role"):
            if item["variable"] not in seen:
                seen.add(item["variable"])
                spec.append(item)
    if not spec:
        return {}
    return {"name": str(name), "description": str(description or ""), "spec": spec}
