"""``@record``: a dataclass, defined for a fraction of what ``@dataclass`` costs.

``@dataclass(frozen=True)`` writes six methods as source text and compiles each (``exec``):
about 0.35 ms a class on this project's machines, and the local runner's process defines some
forty before its first git command (``bench/bench_runner.py``); importing ``dataclasses`` also
loads ``inspect`` and with it ``ast``, ``dis`` and ``tokenize``. ``@record`` makes the same class
with one method of its own, ``__init__`` (so that its signature, speed and errors are those of
a dataclass; its code is a copy of a template of :mod:`promoter.recordinits` with the field
names put in, nothing compiled), and the others shared: ``__eq__``, ``__hash__``,
``__repr__``, ``__setattr__`` and ``__delattr__`` read the field names from the class.
``dataclasses`` itself is not imported.

What comes out is a dataclass to everything that asks: ``__dataclass_fields__`` holds fields
with the attributes of :class:`dataclasses.Field`, so :func:`dataclasses.replace`,
:func:`dataclasses.fields`, :func:`dataclasses.asdict` and :func:`dataclasses.is_dataclass`
work, and type checkers see ``@dataclass(frozen=True)`` (PEP 681), or ``@dataclass`` with
``@record(frozen=False)``. :func:`field` and :func:`replace` are this module's
:func:`dataclasses.field` and :func:`dataclasses.replace`; ``dataclasses.field()`` works in a
record too. Supported: annotated fields with a plain default or a field's ``default``,
``default_factory``, ``repr``, ``compare`` and ``hash``, and inheritance from other records or
dataclasses. Anything else (``InitVar``, ``ClassVar``, ``KW_ONLY``, ``init=False``, ``kw_only``,
``__post_init__``) is made by :func:`dataclasses.dataclass` itself, so the result is always
right.
"""

from __future__ import annotations

import sys
from operator import attrgetter
from types import FunctionType

from promoter import recordinits as _templates
from promoter.lean import TYPE_CHECKING, dataclass_transform

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from dataclasses import field as _stdlib_field
    from typing import Any, TypeVar, overload

    _T = TypeVar("_T")
else:
    _stdlib_field = None  # only the type checker needs to know dataclasses.field here

_UNSUPPORTED = ("InitVar", "KW_ONLY", "ClassVar")


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


_UNSET: Any = _Unset()


def _dataclasses() -> Any:
    # Loaded only by what looks at fields the way dataclasses does (replace, fields, asdict):
    # that code has imported dataclasses itself.
    import dataclasses

    return dataclasses


class Field:
    """A record's field: the attributes :class:`dataclasses.Field` has."""

    __slots__ = (
        "_default",
        "_default_factory",
        "compare",
        "hash",
        "init",
        "kw_only",
        "metadata",
        "name",
        "repr",
        "type",
    )

    def __init__(
        self,
        default: Any = _UNSET,
        default_factory: Any = _UNSET,
        *,
        init: bool = True,
        repr: bool = True,
        hash: bool | None = None,
        compare: bool = True,
        metadata: Mapping[Any, Any] | None = None,
        kw_only: Any = _UNSET,
    ) -> None:
        if default is not _UNSET and default_factory is not _UNSET:
            raise ValueError("cannot specify both default and default_factory")
        self.name: str = ""
        self.type: Any = None
        self._default = default
        self._default_factory = default_factory
        self.init = init
        self.repr = repr
        self.hash = hash
        self.compare = compare
        self.metadata = metadata or {}
        self.kw_only = kw_only

    @property
    def has_default(self) -> bool:
        return self._default is not _UNSET

    @property
    def has_factory(self) -> bool:
        return self._default_factory is not _UNSET

    @property
    def default(self) -> Any:
        return self._default if self.has_default else _dataclasses().MISSING

    @property
    def default_factory(self) -> Any:
        return self._default_factory if self.has_factory else _dataclasses().MISSING

    @property
    def _field_type(self) -> Any:
        # What dataclasses.fields() and replace() tell fields from pseudo-fields by.
        return _dataclasses()._FIELD

    def __repr__(self) -> str:
        return f"Field(name={self.name!r}, type={self.type!r}, default={self._default!r})"


class _Params:
    """``__dataclass_params__``: what dataclasses reads of a base class."""

    __slots__ = ("frozen",)
    init = repr = eq = True
    order = unsafe_hash = False

    def __init__(self, frozen: bool) -> None:
        self.frozen = frozen


_FROZEN, _MUTABLE = _Params(True), _Params(False)


def field(
    *,
    default: Any = _UNSET,
    default_factory: Callable[[], Any] = _UNSET,
    init: bool = True,
    repr: bool = True,
    hash: bool | None = None,
    compare: bool = True,
    metadata: Mapping[Any, Any] | None = None,
    kw_only: bool = _UNSET,
) -> Any:
    """:func:`dataclasses.field`, for records."""
    return Field(
        default,
        default_factory,
        init=init,
        repr=repr,
        hash=hash,
        compare=compare,
        metadata=metadata,
        kw_only=kw_only,
    )


def replace(obj: _T, /, **changes: Any) -> _T:
    """:func:`dataclasses.replace`: a copy of a record (or dataclass) with ``changes``."""
    fields = getattr(type(obj), "__dataclass_fields__", None)
    if fields is None:
        raise TypeError("replace() should be called on dataclass instances")
    for name, f in fields.items():
        if f.init and name not in changes:
            changes[name] = getattr(obj, name)
    return type(obj)(**changes)


def _adopt(f: Any) -> Field:
    """A dataclasses.Field (from ``dataclasses.field()`` or a dataclass base) as a Field."""
    if isinstance(f, Field):
        return f
    missing = sys.modules["dataclasses"].MISSING
    made = Field(
        _UNSET if f.default is missing else f.default,
        _UNSET if f.default_factory is missing else f.default_factory,
        init=f.init,
        repr=f.repr,
        hash=f.hash,
        compare=f.compare,
        metadata=f.metadata,
        kw_only=_UNSET if f.kw_only is missing else f.kw_only,
    )
    made.name, made.type = f.name, f.type
    return made


def _is_field(value: object) -> bool:
    kind = type(value)
    return kind is Field or (kind.__name__ == "Field" and kind.__module__ == "dataclasses")


def _own_fields(cls: type) -> list[Field] | None:
    """The fields ``cls`` itself declares, as dataclasses would make them; None when one uses
    something only dataclasses itself supports."""
    # The class's own annotations only (inspect.get_annotations would import inspect).
    annotations = cls.__dict__.get("__annotations__", {})  # noqa: RUF063
    fields: list[Field] = []
    for name, annotation in annotations.items():
        text = annotation if isinstance(annotation, str) else repr(annotation)
        if any(word in text for word in _UNSUPPORTED):
            return None
        default = cls.__dict__.get(name, _UNSET)
        if _is_field(default):
            f = _adopt(default)
            if not f.init or f.kw_only not in (_UNSET, False):
                return None
        else:
            if default is not _UNSET and default.__class__.__hash__ is None:
                raise ValueError(
                    f"mutable default {type(default)} for field {name} is not allowed: "
                    "use default_factory"
                )
            f = Field(default)
        f.name = name
        f.type = annotation
        fields.append(f)
    return fields


class _Factory:
    """The default of a parameter whose field has a ``default_factory``."""

    def __repr__(self) -> str:
        return "<factory>"


_HAS_FACTORY = _Factory()


def _init(cls: type, fields: list[Field], frozen: bool) -> Callable[..., None]:
    defaults: list[object] = []
    for f in fields:
        if f.has_default:
            defaults.append(f._default)
        elif f.has_factory:
            defaults.append(_HAS_FACTORY)
        elif defaults:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
    names = [f.name for f in fields]
    factories = tuple(f._default_factory if f.has_factory else None for f in fields)
    init = _from_template(names, frozen, factories)
    if init is None:
        init = _compiled(names, frozen, factories)
    init.__defaults__ = tuple(defaults) or None
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    # As dataclasses annotates it (set here, not compiled: the same to inspect and get_type_hints).
    init.__annotations__ = {f.name: f.type for f in fields} | {"return": None}
    return init


# Compiling an __init__ costs some 0.6 M instructions (the parser, the compiler and all), more
# than everything else a record takes together: the local runner's first forty classes would
# spend ~6 ms on it (bench/bench_runner.py). So the code of each __init__ is a copy of one of a
# few templates (promoter/recordinits.py, loaded from its .pyc like any module) with the
# parameter and attribute names put in; only a class with more fields than any template is
# compiled for itself. Both ways give the same function (tests/test_records.py).
TEMPLATE_SIZES = range(21)


def _template_name(frozen: bool, factories: bool, size: int) -> str:
    return f"{'frozen' if frozen else 'mutable'}{'_with_factories' if factories else ''}_{size}"


def _init_source(name: str, fields: Sequence[str], frozen: bool, factories: bool) -> str:
    """An __init__ assigning ``fields`` in order; with ``factories``, each field left at its
    default is given ``__f[i]()`` instead (``__f``: the fields' default factories)."""
    body = []
    for i, field_name in enumerate(fields):
        value = field_name
        if factories:
            value = f"__f[{i}]() if {field_name} is __factory else {field_name}"
        if frozen:
            body.append(f"    __set(self, {field_name!r}, {value})")
        else:
            body.append(f"    self.{field_name} = {value}")
    return f"def {name}(self{''.join(f', {n}' for n in fields)}):\n" + (
        "\n".join(body) or "    pass"
    )


_TEMPLATES_HEADER = (
    '"""Templates of the ``__init__`` of records, generated by promoter.records.\n\n'
    "Written by :func:`promoter.records.templates_module`: do not edit.\n"
    "Each is copied with its class's field names put in for ``_0``, ``_1``...; ``__set``,\n"
    "``__factory`` and ``__f`` are the globals of the copy, not of this module.\n"
    '"""\n\n# ruff: noqa\n# mypy: ignore-errors\n# fmt: off\n'
)


def templates_module() -> str:
    """The text of promoter/recordinits.py (tests/test_records.py keeps the file equal to it)."""
    parts = [_TEMPLATES_HEADER]
    for frozen in (True, False):
        for factories in (False, True):
            for size in TEMPLATE_SIZES:
                name = _template_name(frozen, factories, size)
                placeholders = [f"_{i}" for i in range(size)]
                parts.append("\n\n" + _init_source(name, placeholders, frozen, factories) + "\n")
    return "".join(parts)


def _from_template(
    names: list[str], frozen: bool, factories: tuple[Any, ...]
) -> Callable[..., None] | None:
    if len(names) not in TEMPLATE_SIZES or "self" in names:
        return None
    try:
        code = getattr(_templates, _template_name(frozen, any(factories), len(names))).__code__
        renamed = {f"_{i}": name for i, name in enumerate(names)}
        code = code.replace(
            co_varnames=("self", *names),
            co_names=tuple(renamed.get(n, n) for n in code.co_names),
            co_consts=tuple(renamed.get(c, c) if type(c) is str else c for c in code.co_consts),
            co_name="__init__",
        )
    except (AttributeError, TypeError, ValueError):  # another implementation
        return None
    return FunctionType(code, _init_globals(factories), "__init__")


def _compiled(names: list[str], frozen: bool, factories: tuple[Any, ...]) -> Callable[..., None]:
    globals_ = _init_globals(factories)
    exec(_init_source("__init__", names, frozen, any(factories)), globals_)
    return globals_["__init__"]  # type: ignore[no-any-return]


def _init_globals(factories: tuple[Any, ...]) -> dict[str, Any]:
    """What an ``__init__`` from :func:`_init_source` refers to, template copy or compiled."""
    return {"__set": object.__setattr__, "__factory": _HAS_FACTORY, "__f": factories}


def _methods(cls: Any, fields: list[Field], frozen: bool) -> dict[str, Any]:
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
            raise _dataclasses().FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in all_names:
            raise _dataclasses().FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    methods: dict[str, Any] = {"__eq__": __eq__, "__repr__": __repr__}
    if frozen:
        methods.update(__hash__=__hash__, __setattr__=__setattr__, __delattr__=__delattr__)
    for fn in methods.values():
        fn.__qualname__ = f"{cls.__qualname__}.{fn.__name__}"
    if not frozen:
        methods["__hash__"] = None  # as dataclasses leaves a mutable class with __eq__
    return methods


if TYPE_CHECKING:

    @overload
    def record(cls: type[_T], /) -> type[_T]: ...

    @overload
    def record(*, frozen: bool = True) -> Callable[[type[_T]], type[_T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(field, _stdlib_field))
def record(cls: Any = None, /, *, frozen: bool = True) -> Any:
    """Make ``cls`` what ``@dataclass(frozen=True)`` would make it, or ``@dataclass`` with
    ``frozen=False`` (see the module's text)."""
    if cls is None:
        return lambda cls: _make(cls, frozen)
    return _make(cls, frozen)


def _make(cls: Any, frozen: bool) -> Any:
    own = _own_fields(cls)
    special = "__setattr__" in cls.__dict__ or "__delattr__" in cls.__dict__
    if own is None or hasattr(cls, "__post_init__") or (frozen and special):
        import dataclasses

        return dataclasses.dataclass(frozen=frozen)(cls)
    inherited: dict[str, Field] = {}
    for base in cls.__mro__[-1:0:-1]:
        base_fields = base.__dict__.get("__dataclass_fields__")
        if base_fields is not None:
            if base.__dict__["__dataclass_params__"].frozen != frozen:
                raise TypeError("cannot inherit a frozen dataclass from a non-frozen one, or back")
            inherited.update((name, _adopt(f)) for name, f in base_fields.items())
    for f in own:
        inherited[f.name] = f
        # As dataclasses leaves them: a plain default stays a class attribute, a factory's
        # field is no attribute of the class at all.
        if f.has_default:
            setattr(cls, f.name, f._default)
        elif f.name in cls.__dict__:
            delattr(cls, f.name)
    fields = list(inherited.values())
    cls.__dataclass_fields__ = inherited
    cls.__dataclass_params__ = _FROZEN if frozen else _MUTABLE
    if "__init__" not in cls.__dict__:
        cls.__init__ = _init(cls, fields, frozen)
    explicit_hash = cls.__dict__.get("__hash__", _UNSET)
    has_own_eq = "__eq__" in cls.__dict__
    for name, method in _methods(cls, fields, frozen).items():
        if name == "__hash__":
            # A class that writes its own __eq__ and no __hash__ has __hash__ None in its dict.
            if explicit_hash is not _UNSET and not (explicit_hash is None and has_own_eq):
                continue
        elif name in cls.__dict__:
            continue
        setattr(cls, name, method)
    setattr(cls, "__match_args__", tuple(f.name for f in fields))  # noqa: B010 (read-only to mypy)
    if cls.__doc__ is None:
        cls.__doc__ = f"{cls.__name__}({', '.join(f.name for f in fields)})"
    return cls
