# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The one shape of the node-pool engines behind gpu_ops.cluster.gpu_nodepool (one per provider).

A run is ``NodePoolEngine.execute``, the same for every cloud:

1. **validate** (``validate(params)``, a module function of the engine): every input problem, before
   any request; the module fails with all of them at once.
2. **read** (``read()``): the pool once, after any running operation on it has settled, plus what
   planning needs (the GKE engine reads the cluster).
3. **plan** (``plan_present(current)`` / ``plan_absent(current)``): the differences go into one
   ``_plan.Plan``; a refused change raises ``PoolError``.
4. **preflight** (``preflight()``): reads of the resources the pool refers to (networks, the cluster,
   machine types, ...), after the plan is known and before the first mutating request, in check
   mode too. It reads through the same session as every other read (so render mode finds nothing
   and the test doubles record it), and fails with ``PoolError`` naming the option.
5. **apply** (``apply()``), outside check mode only.
6. **result**: ``changed``/``changes``/``diff`` from the Plan, the pool under ``node_pool`` (the
   resulting-document rule, ``_plan.resulting_document``) and, with ``state=present``,
   ``expected_resources(params, pool)``: the extended resources one node advertises.

``run(params, context, engine_class)`` is the module's entry point of ``_core.contract``: it returns the
result, and every failure (input problems, ``PoolError``, ``WaitTimeout``, ``ApiError``) is an ``EngineError``.
"""

from __future__ import annotations

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.contract import EngineError
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.transport import ApiError
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.plan import Plan, resulting_document
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.waiter import WaitTimeout


class PoolError(Exception):
    """A problem found while reading, planning or applying (the message names the options)."""


def foreign_option_problems(problems, params, foreign, provider, owner):
    """Options of the other provider that are set (``foreign``: option -> value that counts as unset)."""
    for option, unset in sorted(foreign.items()):
        if params.get(option) not in (None, unset):
            problems.add(option, "is %s option; it cannot be used with provider=%s" % (owner, provider))


def error_text(exc):
    """A short text of an ApiError or operation error (no headers, no secrets)."""
    describe = getattr(exc, "describe", None)
    return describe() if callable(describe) else "%s" % (exc,)


class NodePoolEngine:
    """Base of the node-pool engines; a subclass fills in the hooks below."""

    PROVIDER = None  # the gpu_nodepool provider, in messages
    API = None  # the API, in "<API> request failed: ..."

    def __init__(self, context, session):
        self.context = context
        self.params = context.params
        self.session = session
        self.check_mode = bool(context.check_mode)
        self.plan = Plan()
        self.warnings = []
        # the pool as a write answered it, when the API answers writes with the resource (ARM);
        # it stands before a read-back in the result
        self.answered = None

    # ---------------------------------------------------------------- hooks

    @staticmethod
    def validate(params):
        """All input problems (a _problems.Problems), without any request."""
        raise NotImplementedError

    @classmethod
    def open_session(cls, context, **options):
        """The provider's session for this run (``context.session``; ``options`` go to it, for tests)."""
        raise NotImplementedError

    def read(self):
        """The current pool document (None when absent), settled unless in check mode."""
        raise NotImplementedError

    def plan_present(self, current):
        raise NotImplementedError

    def plan_absent(self, current):
        raise NotImplementedError

    def preflight(self):
        """Reads of what the pool refers to; raise PoolError naming the option when one is wrong.

        Called after planning (``self.plan`` says what will change) and before the first mutating
        request, in check mode too. Default: nothing to check. Every read goes through
        ``self.session`` like the others; in render mode (``self.session.render``) reads find
        nothing, so an override skips its checks there.
        """

    def apply(self):
        """Carry out ``self.plan`` (outside check mode only)."""
        raise NotImplementedError

    def read_back(self):
        """The pool after apply (None when it cannot be read)."""
        return self.read()

    def desired_document(self):
        """The pool document that stands in for a resource that was only rendered."""
        raise NotImplementedError

    @staticmethod
    def expected_resources(params, pool=None):
        """Extended resources one node advertises ({"nvidia.com/gpu": N}), or None when unknown."""
        raise NotImplementedError

    # ---------------------------------------------------------------- the run

    def resulting_document(self, current):
        """The pool the module returns (see _plan.resulting_document)."""
        return resulting_document(self.params.get("state", "present"), self.check_mode, self.plan.changed, current,
                                  self.session.render, self.read_back, self.desired_document, self.answered)

    def execute(self):
        """read -> plan -> preflight -> apply -> the module result; EngineError when the run fails."""
        present = self.params.get("state", "present") == "present"
        pool = None
        try:
            current = self.read()
            if present:
                self.plan_present(current)
            else:
                self.plan_absent(current)
            self.preflight()
            if not self.check_mode:
                self.apply()
            pool = self.resulting_document(current)
        except (PoolError, WaitTimeout) as exc:
            raise EngineError(str(exc), changes=[c.as_dict() for c in self.plan.changes])
        except ApiError as exc:
            raise EngineError("%s request failed: %s" % (self.API, error_text(exc)),
                              changes=[c.as_dict() for c in self.plan.changes], status=exc.status)
        for warning in self.warnings:
            self.context.warn(warning)
        result = self.plan.result(diff=self.context.diff)
        result["node_pool"] = pool or {}
        if present:
            expected = self.expected_resources(self.params, pool)
            if expected:
                result["expected_resources"] = expected
        return result


def input_check(params, engine_class):
    """What ``validate_only`` returns: every input problem of the pool (``problems``, ``option: problem`` lines), and
    no request. The module's run and the action plugin's check in the controller both answer with it."""
    return dict(changed=False, problems=list(engine_class.validate(params).items))


def run(params, context, engine_class, **session_options):
    """validate, then open the session and execute; returns the module result (the contract of
    ``_core.contract``; ``session_options`` go to the session, for tests). With ``validate_only``, the problems
    only (``input_check``)."""
    if params.get("validate_only"):
        return input_check(params, engine_class)
    problems = engine_class.validate(params)
    if problems:
        raise EngineError(problems.message("gpu_nodepool (provider %s)" % engine_class.PROVIDER),
                          problems=problems.items)
    return engine_class(context, engine_class.open_session(context, **session_options)).execute()


def run_info(problems, read):
    """The result of gpu_nodepool_info for one cloud: ``problems`` (the names of the read's path, checked before the
    first GET) refused as one EngineError; ``read()``: ``(pools facts, cluster exists)``, an API error named."""
    if problems:
        raise EngineError(problems.message("gpu_nodepool_info"))
    try:
        pools, exists = read()
    except ApiError as exc:
        raise EngineError("request failed: %s" % exc.describe(), status=exc.status)
    return dict(changed=False, cluster_exists=exists, node_pools=pools)
