"""``upsertsink.lint.base.structs``: the linter's data classes behave as ``dataclasses`` ones do (issue #24, item 5:
start-up), checked side by side with the standard library on the same class bodies."""

from __future__ import annotations

import dataclasses
import pickle
from typing import ClassVar

import pytest
from upsertsink.lint.base import structs
from upsertsink.lint.check.checker import Finding


def _pair(frozen: bool) -> tuple[type, type]:
    def body(deco: object, fld: object) -> type:
        @deco(frozen=frozen)
        class Point:
            x: int
            y: int = 0
            tags: list = fld(default_factory=list)
            KIND: ClassVar[str] = "point"

            def norm(self) -> int:
                return abs(self.x) + abs(self.y)

        return Point

    return body(dataclasses.dataclass, dataclasses.field), body(structs.struct, structs.field)


@pytest.mark.parametrize("frozen", [False, True])
def test_a_struct_is_built_and_compared_as_a_dataclass_is(frozen: bool) -> None:
    std, ours = _pair(frozen)
    for cls in (std, ours):
        a, b = cls(1, 2), cls(x=1, y=2)
        assert a == b and a.norm() == 3 and a.tags == [] and a.tags is not cls(1).tags
        assert cls(1) != cls(2) and cls(1).y == 0 and cls.KIND == "point"
        assert (a == (1, 2, [])) is False
        assert repr(a) == "Point(x=1, y=2, tags=[])" or repr(a).endswith("Point(x=1, y=2, tags=[])")
        for bad in ((), (1, 2, [], 4)):
            with pytest.raises(TypeError):
                cls(*bad)
        with pytest.raises(TypeError):
            cls(1, z=3)
        with pytest.raises(TypeError):
            cls(1, x=1)
    assert [f.name for f in dataclasses.fields(std)] == list(structs.fields_of(ours))
    if frozen:
        for cls, error in ((std, dataclasses.FrozenInstanceError), (ours, structs.FrozenInstanceError)):
            p = cls(1, 2)
            with pytest.raises(TypeError, match="unhashable"):  # hashed by its fields: a list is not hashable
                hash(p)
            with pytest.raises(AttributeError):
                p.x = 5
            with pytest.raises(error):
                del p.x
    else:
        for cls in (std, ours):
            assert cls.__hash__ is None
            p = cls(1)
            p.x = 5
            assert p.x == 5


def test_a_frozen_struct_of_hashable_fields_is_hashable_by_value() -> None:
    @structs.struct(frozen=True)
    class Key:
        table: str
        columns: tuple[str, ...] = ()

    assert {Key("t", ("id",)): 1}[Key("t", ("id",))] == 1
    assert len({Key("t"), Key("t"), Key("u")}) == 2


def test_replace_runs_post_init_and_refuses_an_unknown_field() -> None:
    calls: list[int] = []

    @structs.struct(frozen=True)
    class Counted:
        n: int

        def __post_init__(self) -> None:
            calls.append(self.n)

    c = structs.replace(Counted(1), n=2)
    assert c.n == 2 and calls == [1, 2]
    with pytest.raises(TypeError, match="no field 'm'"):
        structs.replace(c, m=3)


def test_a_subclass_keeps_the_fields_and_methods_of_its_base() -> None:
    @structs.struct(frozen=True)
    class Base:
        a: int
        b: str = "b"

        def describe(self) -> str:
            return f"{self.a}{self.b}"

    class Plain(Base):  # not decorated itself, as WriteRule(Rule)
        def describe(self) -> str:
            return "plain " + super().describe()

    @structs.struct(frozen=True)
    class More(Base):
        c: float = 0.5

    assert Plain(1).describe() == "plain 1b" and Plain(1) == Plain(1, "b") and Plain(1) != Base(1)
    assert structs.fields_of(More) == ("a", "b", "c") and More(1, "x", 2.0).describe() == "1x"


def test_findings_survive_pickling_and_replace() -> None:
    f = Finding(
        "a.py",
        1,
        2,
        1,
        5,
        "ND001",
        "error",
        "m",
        "key",
        "id",
        fix={"applicability": "safe", "message": "seed it"},
    )
    assert pickle.loads(pickle.dumps(f)) == f and hash(pickle.loads(pickle.dumps(f)).path) == hash("a.py")
    assert list(f.to_dict())[:3] == ["path", "line", "column"] and "table" not in f.to_dict()
    moved = structs.replace(f, line=7)
    assert moved.line == 7 and moved.path == "a.py" and f.line == 1
