# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Mutation check of one engine file: would its tests notice a developer's typical slip?

    .venv/bin/python scripts/mutate.py plugins/module_utils/_mig/placement.py \
        tests/unit/plugins/module_utils/_mig/test_placement.py [more test files] [--function nearest_fit] [--max 80]

Each mutant changes one spot of the engine (a comparison flipped or moved by one, ``and``/``or`` swapped,
a ``not`` dropped, ``+``/``-`` swapped, an integer constant moved by one, ``True``/``False`` swapped, a
``return`` value replaced by ``None``) and runs the given tests, stopping at the first failure. A mutant the
tests fail on is *killed*; one they pass is a *survivor*: either a missing test or an equivalent change
(name which in the report). The working tree is never touched: the tree is staged once into a temporary
``ansible_collections/gpu_ops/cluster`` (as scripts/dev-pytest.sh does) and each mutant is written there.
Prints one line per mutant and the kill rate; ``--json FILE`` writes the same as JSON.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_COMPARE_SWAPS = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
    ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}
_BINOP_SWAPS = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.FloorDiv: ast.Mult}


def _docstring_nodes(tree):
    """Constant nodes that are docstrings (never mutated)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def _functions(tree):
    """{id(node): enclosing function name} for every node inside a function."""
    owner = {}
    for func in ast.walk(tree):
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(func):
                owner.setdefault(id(node), func.name)
    return owner


def _sites(tree):
    """(node, kind, description) of every spot a mutant can change, in source order."""
    skip = _docstring_nodes(tree)
    sites = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for index, op in enumerate(node.ops):
                if type(op) in _COMPARE_SWAPS:
                    sites.append((node, ("compare", index), "%s -> %s" % (type(op).__name__, _COMPARE_SWAPS[type(op)].__name__)))
        elif isinstance(node, ast.BoolOp):
            sites.append((node, ("boolop",), "%s -> %s" % (type(node.op).__name__, "Or" if isinstance(node.op, ast.And) else "And")))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            sites.append((node, ("not",), "drop not"))
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINOP_SWAPS:
            # string formatting ("%s" % x) and list/str concatenation stay: only arithmetic is swapped
            if not (isinstance(node.left, ast.Constant) and isinstance(node.left.value, str)):
                sites.append((node, ("binop",), "%s -> %s" % (type(node.op).__name__, _BINOP_SWAPS[type(node.op)].__name__)))
        elif isinstance(node, ast.Constant) and id(node) not in skip:
            if node.value is True or node.value is False:
                sites.append((node, ("bool",), "%r -> %r" % (node.value, not node.value)))
            elif isinstance(node.value, int) and not isinstance(node.value, bool):
                sites.append((node, ("int",), "%d -> %d" % (node.value, node.value + 1)))
        elif isinstance(node, ast.Return) and node.value is not None and not (
                isinstance(node.value, ast.Constant) and node.value.value is None):
            sites.append((node, ("return",), "return None"))
    return sorted(sites, key=lambda s: (getattr(s[0], "lineno", 0), getattr(s[0], "col_offset", 0), s[2]))


def _apply(node, kind):
    if kind[0] == "compare":
        node.ops[kind[1]] = _COMPARE_SWAPS[type(node.ops[kind[1]])]()
    elif kind[0] == "boolop":
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif kind[0] == "binop":
        node.op = _BINOP_SWAPS[type(node.op)]()
    elif kind[0] == "bool":
        node.value = not node.value
    elif kind[0] == "int":
        node.value = node.value + 1
    elif kind[0] == "return":
        node.value = ast.Constant(value=None)


def _replace_not(tree, target):
    """Drop the ``not`` of ``target`` (a UnaryOp has to be replaced in its parent)."""
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is target:
                setattr(parent, field, target.operand)
                return
            if isinstance(value, list):
                for index, item in enumerate(value):
                    if item is target:
                        value[index] = target.operand
                        return


def mutants(source, functions=None):
    """[dict(line, function, change, source)] for every mutant of ``source`` (optionally only in ``functions``)."""
    tree = ast.parse(source)
    owner = _functions(tree)
    found = []
    for number, (node, kind, change) in enumerate(_sites(tree)):
        function = owner.get(id(node))
        if functions and function not in functions:
            continue
        copy_tree = ast.parse(source)
        target = _sites(copy_tree)[number][0]
        if kind[0] == "not":
            _replace_not(copy_tree, target)
        else:
            _apply(target, kind)
        found.append(dict(line=node.lineno, function=function, change=change, source=ast.unparse(copy_tree)))
    return found


def _stage(build):
    dest = build / "ansible_collections" / "gpu_ops" / "cluster"
    dest.mkdir(parents=True)
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=str(ROOT), check=True,
                            capture_output=True).stdout.decode("utf-8").split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    for namespace, name in (("kubernetes", "core"), ("awx", "awx")):
        linked = ROOT / ".collections" / "ansible_collections" / namespace / name
        if linked.exists():
            (build / "ansible_collections" / namespace).mkdir(parents=True, exist_ok=True)
            os.symlink(linked.resolve(), build / "ansible_collections" / namespace / name)
    return dest


def _run_tests(dest, build, tests, timeout):
    environment = dict(os.environ, PYTHONPATH=str(build), ANSIBLE_COLLECTIONS_PATH=str(build))
    try:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
                              + tests, cwd=str(dest), env=environment, capture_output=True, text=True, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired:
        return "killed (timeout)"
    if proc.returncode == 0:
        return "survived"
    if proc.returncode in (1,):
        return "killed"
    return "error (pytest rc %d): %s" % (proc.returncode, (proc.stdout + proc.stderr).strip().splitlines()[-1:])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("engine", help="the engine file, relative to the repository root")
    parser.add_argument("tests", nargs="+", help="test files or node ids that should catch the mutants")
    parser.add_argument("--function", action="append", help="only mutate these functions (repeatable)")
    parser.add_argument("--max", type=int, default=0, help="at most this many mutants, spread evenly (0: all)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per test run")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    source = (ROOT / args.engine).read_text(encoding="utf-8")
    found = mutants(source, set(args.function) if args.function else None)
    if args.max and len(found) > args.max:
        step = len(found) / float(args.max)
        found = [found[int(i * step)] for i in range(args.max)]
    build = Path(tempfile.mkdtemp(prefix="gpu-ops-mutate-"))
    try:
        dest = _stage(build)
        baseline = _run_tests(dest, build, args.tests, args.timeout)
        if baseline != "survived":
            print("the tests fail without any mutant (%s): fix them first" % baseline)
            return 2
        results = []
        started = time.time()
        for mutant in found:
            (dest / args.engine).write_text(mutant["source"], encoding="utf-8")
            outcome = _run_tests(dest, build, args.tests, args.timeout)
            results.append(dict(line=mutant["line"], function=mutant["function"], change=mutant["change"], outcome=outcome))
            print("%-9s %s:%d %s: %s" % (outcome.split(" ")[0], args.engine, mutant["line"], mutant["function"] or "-",
                                         mutant["change"]), flush=True)
        (dest / args.engine).write_text(source, encoding="utf-8")
    finally:
        shutil.rmtree(build, ignore_errors=True)
    killed = sum(1 for r in results if r["outcome"].startswith("killed"))
    rate = 100.0 * killed / max(len(results), 1)
    print("%s: %d of %d mutants killed (%.0f%%) in %.0f s" % (args.engine, killed, len(results), rate, time.time() - started))
    if args.json:
        Path(args.json).write_text(json.dumps(dict(engine=args.engine, tests=args.tests, killed=killed,
                                                   total=len(results), results=results), indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
