"""scripts/import_graph.py's count of code lines (what ARCHITECTURE.md's package figures use)."""

import ast
import importlib.util
import os

_PATH = os.path.join(os.path.dirname(__file__), "..", "scripts", "import_graph.py")
_spec = importlib.util.spec_from_file_location("import_graph", _PATH)
import_graph = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(import_graph)


def test_code_lines_leave_out_docstrings_comments_and_blank_lines():
    text = '''"""A module.

Its docstring runs on.
"""

import os  # a comment after code counts


class A:
    """One line."""

    # a comment alone
    def f(self):
        """Two
        lines."""
        x = "not a docstring"
        return x
'''
    # counted: import, class, def, x =, return
    assert import_graph.code_lines(text, ast.parse(text)) == 5


def test_code_lines_of_a_module_without_docstrings():
    text = "x = 1\n\n\ny = '''a\nb'''\n"
    assert import_graph.code_lines(text, ast.parse(text)) == 3
