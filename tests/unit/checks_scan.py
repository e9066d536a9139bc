# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The input checks of the collection's Python code, read from the source (no import, nothing run).

An input check is a line of code that reports a value the user gave as wrong, in the form the behaviour contract sets
(docs/behaviour-contract.md, "Validate first"; ``_core.problems``): ``<problems>.add(option, why)``, an
``"option: why"`` line appended to a list named ``problems``, or an error raised with an ``"option: why"`` message.
``sites(entry)`` lists the checks the code reachable from a function can run; the call graph follows the collection's
own imports (``engine("...")`` of the filters included), ``self``/``cls`` methods with their bases, a class's
``__init__``, functions handed on by name, and, for a method called on any other object, every method of that name in
the files reached (more than runs), unless the name is one of Python's own types' methods (``BUILTIN_METHODS``).
"""

from __future__ import annotations

import ast
import functools
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = "ansible_collections.gpu_ops.cluster."
# "option: why", the option with its path ("gpus[%d].profiles", "fabric.mtu", "%s.gpu")
# methods of Python's own types (dict, list, str, re, files): a call of one of these names on an object the scan cannot
# type is taken as the builtin's, not as every collection method of that name (``params.get`` is no HTTP GET)
BUILTIN_METHODS = frozenset((
    "get", "items", "keys", "values", "append", "add", "extend", "update", "pop", "setdefault", "copy", "clear",
    "insert", "remove", "sort", "index", "count", "join", "split", "rsplit", "partition", "rpartition", "strip",
    "lstrip", "rstrip", "format", "startswith", "endswith", "lower", "upper", "replace", "encode", "decode",
    "match", "search", "fullmatch", "findall", "finditer", "sub", "group", "groups", "groupdict", "read", "write",
    "close", "isdigit", "splitlines", "difference", "union", "intersection", "issubset"))
OPTION_MESSAGE = re.compile(r"^(?:%[sdr]|[A-Za-z_][A-Za-z0-9_]*)(?:\[[^\]]*\]|\.(?:%[sdr]|[A-Za-z_][A-Za-z0-9_]*))*: ")


def path_of(dotted):
    """The file of a dotted module name of the collection, or None (not ours, or a package)."""
    if not dotted.startswith(PACKAGE):
        return None
    path = os.path.join(ROOT, *dotted[len(PACKAGE):].split(".")) + ".py"
    return path if os.path.exists(path) else None


def _literal_start(node):
    """The text a message expression starts with, when it starts with a literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mod, ast.Add)):
        return _literal_start(node.left)
    if isinstance(node, ast.JoinedStr) and node.values:
        first = node.values[0]
        return first.value if isinstance(first, ast.Constant) else "%s"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        return _literal_start(node.func.value)
    return None


def _receiver(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def check_of(node):
    """``(kind, what)`` when ``node`` is an input check, else None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
        receiver = _receiver(node.func.value)
        if node.func.attr == "add" and "problems" in receiver:
            option = node.args[0]
            return ("add", option.value if isinstance(option, ast.Constant) else _literal_start(option) or "<computed>")
        if node.func.attr == "append" and "problems" in receiver:
            start = _literal_start(node.args[0])
            if start is not None and OPTION_MESSAGE.match(start):
                return ("append", start.split(":", 1)[0])
    if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
        start = _literal_start(node.exc.args[0])
        if start is not None and OPTION_MESSAGE.match(start):
            return ("raise", start.split(":", 1)[0])
    return None


class Source:
    """One Python file: its functions (``name`` or ``Class.name``), classes and the names it imports."""

    def __init__(self, path):
        self.path = path
        with open(path, encoding="utf-8") as handle:
            self.tree = ast.parse(handle.read(), path)
        self.functions, self.classes, self.modules, self.names = {}, {}, {}, {}
        for node in self.tree.body:
            self._top(node)

    def _top(self, node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.functions[node.name] = node
        elif isinstance(node, ast.ClassDef):
            self.classes[node.name] = node
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.functions["%s.%s" % (node.name, item.name)] = item
                elif isinstance(item, ast.Assign) and len(item.targets) == 1 and isinstance(item.targets[0], ast.Name):
                    # validate = staticmethod(validate): the method is the module's function
                    value = item.value.args[0] if isinstance(item.value, ast.Call) and item.value.args else item.value
                    if isinstance(value, ast.Name) and value.id in self.functions:
                        self.functions["%s.%s" % (node.name, item.targets[0].id)] = self.functions[value.id]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE):
            for alias in node.names:
                module = path_of("%s.%s" % (node.module, alias.name))
                if module:
                    self.modules[alias.asname or alias.name] = module
                elif path_of(node.module):
                    self.names[alias.asname or alias.name] = (path_of(node.module), alias.name)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and len(node.targets) == 1:
            # name = engine("ansible_collections....") (plugin_utils/_core/lazy.py)
            call, target = node.value, node.targets[0]
            if (_receiver(call.func) == "engine" and call.args and isinstance(call.args[0], ast.Constant)
                    and isinstance(target, ast.Name) and path_of(str(call.args[0].value))):
                self.modules[target.id] = path_of(call.args[0].value)
        elif isinstance(node, ast.Try):
            for item in node.body:
                self._top(item)


@functools.lru_cache(maxsize=None)
def source(path):
    return Source(path)


def _class_of(qualified):
    return qualified.split(".", 1)[0] if "." in qualified else None


def _resolve_class(src, name):
    """(path, class name) of a class named in ``src``."""
    if name in src.classes:
        return src.path, name
    if name in src.names:
        path, real = src.names[name]
        if real in source(path).classes:
            return path, real
    return None


def _methods(path, klass, name, seen=None):
    """(path, Class.name) of method ``name`` of ``klass`` or of the first of its bases (in the collection) that has it."""
    seen = seen or set()
    if (path, klass) in seen:
        return []
    seen.add((path, klass))
    src = source(path)
    if "%s.%s" % (klass, name) in src.functions:
        return [(path, "%s.%s" % (klass, name))]
    for base in src.classes[klass].bases:
        found = _resolve_class(src, base.id) if isinstance(base, ast.Name) else None
        if found:
            result = _methods(found[0], found[1], name, seen)
            if result:
                return result
    return []


def _calls(path, qualified, universe):
    """The functions ``qualified`` of ``path`` may call: (path, qualified) pairs."""
    src = source(path)
    klass = _class_of(qualified)
    found = set()
    for node in ast.walk(src.functions[qualified]):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            name = node.id
            if name in src.functions:
                found.add((path, name))
            elif name in src.classes:
                found.update(_methods(path, name, "__init__"))
            elif name in src.names:
                target, real = src.names[name]
                if real in source(target).functions:
                    found.add((target, real))
                elif real in source(target).classes:
                    found.update(_methods(target, real, "__init__"))
        elif isinstance(node, ast.Attribute):
            value, attr = node.value, node.attr
            if isinstance(value, ast.Name) and value.id in src.modules:
                target = source(src.modules[value.id])
                if attr in target.functions:
                    found.add((target.path, attr))
                elif attr in target.classes:
                    found.update(_methods(target.path, attr, "__init__"))
            elif isinstance(value, ast.Name) and value.id in ("self", "cls") and klass:
                # the class's method, or its bases', and the overrides of the subclasses in the files reached
                found.update(_methods(path, klass, attr))
                for other in universe:
                    for name, node in source(other).classes.items():
                        if any(isinstance(base, ast.Name) and base.id == klass for base in node.bases):
                            found.update(_methods(other, name, attr))
            elif isinstance(value, ast.Name) and _resolve_class(src, value.id):
                found.update(_methods(*_resolve_class(src, value.id), attr))
            elif isinstance(value, ast.Call) and _receiver(value.func) == "super":
                # super().name: the method of the class's bases in the collection (a builtin base has none here)
                for base in src.classes[klass].bases if klass else []:
                    resolved = _resolve_class(src, base.id) if isinstance(base, ast.Name) else None
                    if resolved:
                        found.update(_methods(resolved[0], resolved[1], attr))
            elif attr not in BUILTIN_METHODS and not attr.startswith("__"):
                # a method of an object the scan cannot type: every method of that name in the files reached
                for other in universe:
                    found.update((other, name) for name in source(other).functions if name.endswith("." + attr))
    return found


def _universe(path, seen=None):
    """The files reachable from ``path`` by the collection's imports."""
    seen = set() if seen is None else seen
    if path in seen:
        return seen
    seen.add(path)
    src = source(path)
    for target in list(src.modules.values()) + [target for target, dummy in src.names.values()]:
        _universe(target, seen)
    return seen


@functools.lru_cache(maxsize=None)
def reachable(path, qualified):
    """Every (path, function) the function ``qualified`` of ``path`` may run, itself included."""
    universe = frozenset(_universe(path))
    seen, todo = set(), [(path, qualified)]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        universe = universe | _universe(current[0])
        todo.extend(_calls(current[0], current[1], universe) - seen)
    return frozenset(seen)


@functools.lru_cache(maxsize=None)
def checks_in(path, qualified):
    """The input checks written in one function (nested functions included): (path, function, kind, option)."""
    found = []
    for node in ast.walk(source(path).functions[qualified]):
        check = check_of(node)
        if check:
            found.append((os.path.relpath(path, ROOT), qualified) + check)
    return tuple(found)


def sites(path, qualified):
    """Every input check the function ``qualified`` of ``path`` may run, sorted."""
    return sorted({site for function in reachable(path, qualified) for site in checks_in(*function)})
