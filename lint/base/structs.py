"""Data classes for the linter, without code generation: ``@struct``, ``@struct(frozen=True)``, ``field`` and
``replace``, the subset of :mod:`dataclasses` the linter uses, with the same meaning.

Why not :mod:`dataclasses`: it writes each class's ``__init__``, ``__repr__``, ``__eq__`` (and, frozen,
``__hash__``, ``__setattr__``, ``__delattr__``) as source text and compiles them with ``exec`` when the class
is created. That cost about 1.2 ms per frozen class and 0.4 ms per other class on a 2-core AMD EPYC machine,
23 ms for the linter's 29 classes, and the module imports :mod:`inspect` (another 10-17 ms): more than a third
of the 0.1 s start-up a one-file run may take (issue #24, docs/benchmarks.md). Here the methods are ordinary
closures over the field names: a class costs a few microseconds to create.

What a struct is, as with ``@dataclass``: fields are the class's annotations in order (a base struct's
fields first), ``ClassVar`` ones excepted; a field's class attribute is its default, ``field(default_factory=f)``
makes a fresh default per instance. ``__init__`` takes the fields positionally or by name and then calls
``__post_init__`` if the class has one; ``__eq__`` compares the fields of two instances of the same class;
a frozen struct is hashable by its fields and refuses assignment (:class:`FrozenInstanceError`), any other is
unhashable. Methods the class body defines itself are kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_MISSING: Any = object()
_FIELDS = "__struct_fields__"


class FrozenInstanceError(AttributeError):
    """Assignment to a field of a frozen struct."""


class _Field:
    __slots__ = ("default", "factory")

    def __init__(self, default: Any, factory: Callable[[], Any] | None) -> None:
        self.default = default
        self.factory = factory


def field(*, default: Any = _MISSING, default_factory: Callable[[], Any] | None = None) -> Any:
    """A field's default (``default``) or the function that makes one per instance (``default_factory``)."""
    return _Field(default, default_factory)


def fields_of(cls: type) -> tuple[str, ...]:
    """The field names of a struct class, in order."""
    return getattr(cls, _FIELDS)


def replace(obj: T, **changes: Any) -> T:
    """A new instance of ``obj``'s class with ``changes`` applied (through ``__init__``, so ``__post_init__``
    runs again, as with :func:`dataclasses.replace`)."""
    names = getattr(obj.__class__, _FIELDS)
    unknown = set(changes) - set(names)
    if unknown:
        raise TypeError(f"{obj.__class__.__name__} has no field {min(unknown)!r}")
    values = {name: getattr(obj, name) for name in names}
    values.update(changes)
    return obj.__class__(**values)


def struct(cls: type[T] | None = None, *, frozen: bool = False) -> Any:
    """Make ``cls`` a struct (see the module's documentation); ``@struct`` or ``@struct(frozen=True)``."""

    def wrap(c: type[T]) -> type[T]:
        return _build(c, frozen)

    return wrap if cls is None else wrap(cls)


def _is_classvar(annotation: object) -> bool:
    text = annotation if isinstance(annotation, str) else repr(annotation)
    return text.startswith(("ClassVar", "typing.ClassVar", "t.ClassVar"))


def _build(cls: type[T], frozen: bool) -> type[T]:
    names: list[str] = []
    defaults: dict[str, _Field] = {}
    for base in reversed(cls.__mro__[1:]):
        for name in getattr(base, _FIELDS, ()):
            if name not in names:
                names.append(name)
        defaults.update(getattr(base, "__struct_defaults__", {}))
    # (inspect.get_annotations would import inspect, which this module exists to avoid)
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():  # noqa: RUF063
        if _is_classvar(annotation):
            continue
        if name not in names:
            names.append(name)
        value = cls.__dict__.get(name, _MISSING)
        if isinstance(value, _Field):
            defaults[name] = value
            delattr(cls, name)
        elif value is not _MISSING:
            defaults[name] = _Field(value, None)
    order = tuple(names)
    setattr(cls, _FIELDS, order)
    cls.__struct_defaults__ = defaults  # type: ignore[attr-defined]
    own = cls.__dict__
    methods: dict[str, Any] = {
        "__init__": _init(cls.__name__, order, defaults, hasattr(cls, "__post_init__")),
        "__repr__": _repr(order),
        "__eq__": _eq(order),
    }
    if frozen:
        methods["__hash__"] = _hash(order)
        methods["__setattr__"] = _refuse
        methods["__delattr__"] = _refuse
    elif "__hash__" not in own:
        methods["__hash__"] = None  # mutable and compared by value: unhashable, as a dataclass is
    for name, method in methods.items():
        # a method the class body defines is kept; ``__hash__ = None`` is what Python puts there for a body
        # that defines ``__eq__``, not a choice of the class
        if name not in own or (name == "__hash__" and own[name] is None):
            setattr(cls, name, method)
    return cls


def _init(
    cls_name: str, names: tuple[str, ...], defaults: dict[str, _Field], post: bool
) -> Callable[..., None]:
    count = len(names)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        given = len(args)
        if given > count:
            raise TypeError(f"{cls_name}() takes {count} arguments but {given} were given")
        state = self.__dict__
        state.update(zip(names, args))
        if given < count:
            for name in names[given:]:
                if name in kwargs:
                    state[name] = kwargs.pop(name)
                    continue
                default = defaults.get(name)
                if default is None:
                    raise TypeError(f"{cls_name}() missing required argument: {name!r}")
                state[name] = default.default if default.factory is None else default.factory()
        if kwargs:
            name = next(iter(kwargs))
            why = (
                "got multiple values for argument" if name in names else "got an unexpected keyword argument"
            )
            raise TypeError(f"{cls_name}() {why} {name!r}")
        if post:
            self.__post_init__()

    __init__.__qualname__ = f"{cls_name}.__init__"
    return __init__


def _repr(names: tuple[str, ...]) -> Callable[[Any], str]:
    def __repr__(self: Any) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{self.__class__.__qualname__}({inner})"

    return __repr__


def _eq(names: tuple[str, ...]) -> Callable[[Any, Any], Any]:
    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return tuple([getattr(self, n) for n in names]) == tuple([getattr(other, n) for n in names])

    return __eq__


def _hash(names: tuple[str, ...]) -> Callable[[Any], int]:
    def __hash__(self: Any) -> int:
        return hash(tuple([getattr(self, n) for n in names]))

    return __hash__


def _refuse(self: Any, name: str, *value: Any) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r} of a frozen {self.__class__.__name__}")
