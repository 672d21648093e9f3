"""The native parts are listed once (comm_bench/system/native.py PARTS): the build, load()'s
reasons and doctor all read that list."""
import ast
import os
from pathlib import Path

from comm_bench import doctor
from comm_bench.system import native

ROOT = Path(__file__).resolve().parent.parent


def setup_function_named(name):
    """One function of setup.py, without running setup.py (which would build)."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    scope = {"ast": ast, "os": os, "HERE": str(ROOT)}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "setup.py", "exec"), scope)
    return scope[name]


def test_the_build_reads_the_one_list():
    assert setup_function_named("native_parts")() == native.PARTS
    for name, (folder, _what, _why) in native.PARTS.items():
        assert (ROOT / "csrc" / folder).is_dir(), name


def test_doctor_and_load_name_every_part():
    names = [n for n, _ok, _detail in doctor.native_parts()]
    assert len(names) == len(native.PARTS)
    for (name, (_folder, what, _why)), line in zip(native.PARTS.items(), names):
        assert line == f"native {name} ({what})"
    assert native.load("_no_such_part")[1] == "not built"
