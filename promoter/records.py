"""``@record``: a frozen dataclass, defined for a fraction of what ``@dataclass`` costs.

``@dataclass(frozen=True)`` writes six methods as source text and compiles each (``exec``):
about 0.35 ms a class on this project's machines, and the local runner's process defines some
forty before its first git command (``bench/bench_runner.py``). ``@record`` makes the same class
with one compiled method, ``__init__`` (so that its signature, speed and errors are those of a
dataclass), and the others shared: ``__eq__``, ``__hash__``, ``__repr__``, ``__setattr__`` and
``__delattr__`` read the field names from the class.

What comes out is a dataclass to everything that asks: ``__dataclass_fields__`` holds real
:class:`dataclasses.Field` objects, so :func:`dataclasses.replace`, :func:`dataclasses.fields`,
:func:`dataclasses.asdict` and :func:`dataclasses.is_dataclass` work, and type checkers see it
as ``@dataclass(frozen=True)`` (PEP 681). Supported: annotated fields with a plain default or
``field(default=..., default_factory=..., repr=..., compare=..., hash=...)``, and inheritance from
other records or dataclasses. Anything else (``InitVar``, ``KW_ONLY``, ``init=False``, a field
with ``kw_only``, ``__post_init__``) is made by :func:`dataclasses.dataclass` itself, so the
result is always right.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform

_T = TypeVar("_T")
_MISSING: Any = dataclasses.MISSING
# dataclasses.replace() and fields() tell fields from pseudo-fields by this marker.
_FIELD_MARK: Any = dataclasses._FIELD  # type: ignore[attr-defined]
_PARAMS: Any = dataclasses._DataclassParams(  # type: ignore[attr-defined]
    True,
    True,
    True,
    False,
    False,
    True,  # init, repr, eq, order, unsafe_hash, frozen
)
_UNSUPPORTED = ("InitVar", "KW_ONLY", "ClassVar")


class _Factory:
    """The default of a parameter whose field has a ``default_factory``."""

    def __repr__(self) -> str:
        return "<factory>"


_HAS_FACTORY = _Factory()


def _own_fields(cls: type) -> list[dataclasses.Field[Any]] | None:
    """The fields ``cls`` itself declares, as dataclasses would make them; None when one uses
    something only dataclasses itself supports."""
    # The class's own annotations only (inspect.get_annotations would import inspect).
    annotations = cls.__dict__.get("__annotations__", {})  # noqa: RUF063
    fields: list[dataclasses.Field[Any]] = []
    for name, annotation in annotations.items():
        text = annotation if isinstance(annotation, str) else repr(annotation)
        if any(word in text for word in _UNSUPPORTED):
            return None
        default = cls.__dict__.get(name, _MISSING)
        if isinstance(default, dataclasses.Field):
            f = default
            if not f.init or f.kw_only not in (_MISSING, False):
                return None
        else:
            if default is not _MISSING and default.__class__.__hash__ is None:
                raise ValueError(
                    f"mutable default {type(default)} for field {name} is not allowed: "
                    "use default_factory"
                )
            f = dataclasses.field(default=default)
        f.name = name
        f.type = annotation
        f._field_type = _FIELD_MARK  # type: ignore[attr-defined]
        fields.append(f)
    return fields


def _init(cls: type, fields: list[dataclasses.Field[Any]]) -> Callable[..., None]:
    names: dict[str, Any] = {"__set": object.__setattr__, "__factory": _HAS_FACTORY}
    params, body = [], []
    seen_default = False
    for f in fields:
        if f.default is not _MISSING:
            names[f"__d_{f.name}"] = f.default
            params.append(f"{f.name}=__d_{f.name}")
            seen_default = True
        elif f.default_factory is not _MISSING:
            names[f"__f_{f.name}"] = f.default_factory
            params.append(f"{f.name}=__factory")
            seen_default = True
        elif seen_default:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
        else:
            params.append(f.name)
        value = f.name
        if f.default_factory is not _MISSING:
            value = f"__f_{f.name}() if {f.name} is __factory else {f.name}"
        body.append(f"  __set(self, {f.name!r}, {value})")
    source = f"def __init__(self, {', '.join(params)}):\n" + ("\n".join(body) or "  pass")
    exec(source, names)
    init: Callable[..., None] = names["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    # As dataclasses annotates it (set here, not compiled: the same to inspect and get_type_hints).
    init.__annotations__ = {f.name: f.type for f in fields} | {"return": None}
    return init


def _methods(cls: Any, fields: list[dataclasses.Field[Any]]) -> dict[str, Any]:
    shown = [f.name for f in fields if f.repr]
    compared = [f.name for f in fields if f.compare]
    hashed = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
    all_names = frozenset(f.name for f in fields)

    def values(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
        if not names:
            return lambda obj: ()
        if len(names) == 1:
            one = attrgetter(names[0])
            return lambda obj: (one(obj),)
        return attrgetter(*names)

    compare_values, hash_values = values(compared), values(hashed)

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is self.__class__:
            return compare_values(self) == compare_values(other)
        return NotImplemented

    def __hash__(self: Any) -> int:
        return hash(hash_values(self))

    def __repr__(self: Any) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
        return f"{self.__class__.__qualname__}({inner})"

    def __setattr__(self: Any, name: str, value: object) -> None:
        if type(self) is cls or name in all_names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in all_names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    methods = {
        "__eq__": __eq__,
        "__hash__": __hash__,
        "__repr__": __repr__,
        "__setattr__": __setattr__,
        "__delattr__": __delattr__,
    }
    for fn in methods.values():
        fn.__qualname__ = f"{cls.__qualname__}.{fn.__name__}"
    return methods


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def record(cls: type[_T]) -> type[_T]:
    """Make ``cls`` what ``@dataclass(frozen=True)`` would make it (see the module's text)."""
    own = _own_fields(cls)
    special = ("__setattr__", "__delattr__", "__post_init__")
    if (
        own is None
        or any(hasattr(cls, name) for name in special[2:])
        or any(name in cls.__dict__ for name in special[:2])
    ):
        return dataclasses.dataclass(frozen=True)(cls)
    inherited: dict[str, dataclasses.Field[Any]] = {}
    for base in cls.__mro__[-1:0:-1]:
        base_fields = base.__dict__.get("__dataclass_fields__")
        if base_fields is not None:
            if not base.__dict__["__dataclass_params__"].frozen:
                raise TypeError("cannot inherit frozen dataclass from a non-frozen one")
            inherited.update(base_fields)
    for f in own:
        inherited[f.name] = f
        # As dataclasses leaves them: a plain default stays a class attribute, a factory's
        # field is no attribute of the class at all.
        if f.default is not _MISSING:
            setattr(cls, f.name, f.default)
        elif f.name in cls.__dict__:
            delattr(cls, f.name)
    fields = list(inherited.values())
    made: Any = cls  # what is set below is no attribute a type checker knows of cls
    made.__dataclass_fields__ = inherited
    made.__dataclass_params__ = _PARAMS
    if "__init__" not in cls.__dict__:
        made.__init__ = _init(cls, fields)
    explicit_hash = cls.__dict__.get("__hash__", _MISSING)
    has_own_eq = "__eq__" in cls.__dict__
    for name, method in _methods(cls, fields).items():
        if name == "__hash__":
            # A class that writes its own __eq__ and no __hash__ has __hash__ None in its dict.
            if explicit_hash is not _MISSING and not (explicit_hash is None and has_own_eq):
                continue
        elif name in cls.__dict__:
            continue
        setattr(cls, name, method)
    setattr(made, "__match_args__", tuple(f.name for f in fields))  # noqa: B010 (read-only to mypy)
    if cls.__doc__ is None:
        cls.__doc__ = f"{cls.__name__}({', '.join(f.name for f in fields)})"
    return cls
