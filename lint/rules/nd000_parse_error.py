"""ND000: a file that cannot be parsed."""

from .rule import Invalid, Rule, Valid

RULE = Rule(
    code="ND000",
    name="parse-error",
    verb="cannot be parsed",
    summary="The file is not valid Python (or not decodable), so nothing in it was checked.",
    description="""
A file that Python cannot parse is reported once, as an error at the position of the syntax error, instead
of silently passing. The same applies to undecodable bytes (a non-UTF-8 file without a coding
declaration), null bytes and code nested too deeply to analyze. The run itself never crashes.
""",
    why="An unchecked file may hold any of the other problems; a green run must mean every file was read.",
    fix={"file": "fix the syntax error, or declare the file's encoding (`# -*- coding: latin-1 -*-`)."},
    valid=(Valid("from pyspark.sql import functions as F\ncol = F.col('a')\n"),),
    invalid=(Invalid("from pyspark.sql import functions as F\ndef broken(:\n    F.rand()\n", 2, 12, None),),
)
