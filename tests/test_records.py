"""``@record`` (promoter/records.py) makes what ``@dataclass(frozen=True)`` makes.

Each shape of class is written twice, once with each decorator, and the two are held to the same
behaviour: construction and its errors, repr, equality, hashing, immutability, the dataclasses
functions, pickling and copying, and inheritance.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from dataclasses import field
from pathlib import Path
from typing import Any

import pytest

from promoter.records import record


def shapes(decorate: Any) -> dict[str, type]:
    @decorate
    class Plain:
        name: str
        count: int = 0

    @decorate
    class Defaults:
        name: str
        tags: tuple[str, ...] = field(default_factory=tuple)
        notes: list[str] = field(default_factory=list, hash=False)
        hidden: str = field(default="x", repr=False)
        loose: int = field(default=1, compare=False)
        unhashed: int = field(default=2, hash=False)

    @decorate
    class Empty:
        pass

    @decorate
    class Child(Plain):
        extra: tuple[str, ...] = ()

    @decorate
    class OwnRepr:
        value: int

        def __repr__(self) -> str:
            return f"<{self.value}>"

    @decorate
    class OwnEq:
        value: int

        def __eq__(self, other: object) -> bool:
            return isinstance(other, OwnEq) and other.value % 10 == self.value % 10

        __hash__ = None  # type: ignore[assignment]

    # More fields than promoter/recordinits.py has templates for: its __init__ is compiled.
    namespace = {
        "__annotations__": {**dict.fromkeys(WIDE, "int"), "last": "list[int]"},
        "last": field(default_factory=list),
    }
    Wide = decorate(type("Wide", (), namespace))

    return {c.__name__: c for c in (Plain, Defaults, Empty, Child, OwnRepr, OwnEq, Wide)}


WIDE = [f"f{i}" for i in range(30)]


def module_level(prefix: str, classes: dict[str, type]) -> dict[str, type]:
    """The classes under names of this module's, so that pickle finds them."""
    for name, cls in classes.items():
        cls.__name__ = cls.__qualname__ = prefix + name
        globals()[prefix + name] = cls
    return classes


MADE = {
    "record": module_level("Record", shapes(record)),
    "dataclass": module_level("Dataclass", shapes(dataclasses.dataclass(frozen=True))),
}
ARGS: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "Plain": (("a",), {"count": 2}),
    "Defaults": (("a",), {"tags": ("t",), "notes": ["n"], "loose": 5}),
    "Empty": ((), {}),
    "Child": (("a", 1), {"extra": ("e",)}),
    "OwnRepr": ((3,), {}),
    "OwnEq": ((13,), {}),
    "Wide": (tuple(range(30)), {}),
}


def observe(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """What a user of the class can see of it, independent of the class object itself."""
    obj = cls(*args, **kwargs)
    seen: dict[str, Any] = {
        "repr": repr(obj),
        "eq_same": obj == cls(*args, **kwargs),
        "eq_other_type": obj == object(),
        "fields": [(f.name, f.default, f.repr, f.compare, f.hash) for f in dataclasses.fields(obj)],
        "asdict": dataclasses.asdict(obj),
        "is_dataclass": dataclasses.is_dataclass(obj),
        "match_args": cls.__match_args__,  # type: ignore[attr-defined]
        "signature": str(inspect.signature(cls)),
        "pickled": pickle.loads(pickle.dumps(obj)) == obj,
        "copied": copy.deepcopy(obj) == obj and copy.copy(obj) == obj,
        "hashable": cls.__hash__ is not None,
    }
    if cls.__hash__ is not None:
        try:
            seen["hash_stable"] = hash(obj) == hash(cls(*args, **kwargs))
        except TypeError as e:  # a list among the fields: unhashable either way
            seen["hash_stable"] = str(e)
    names = [f.name for f in dataclasses.fields(obj)]
    if names:
        changed = dataclasses.replace(obj, **{names[0]: "changed"})
        seen["replaced"] = repr(changed)
        seen["replace_keeps_others"] = [getattr(changed, n) for n in names[1:]]
        with pytest.raises(dataclasses.FrozenInstanceError) as assigned:
            setattr(obj, names[0], "x")
        seen["assign_error"] = str(assigned.value)
        with pytest.raises(dataclasses.FrozenInstanceError) as deleted:
            delattr(obj, names[0])
        seen["delete_error"] = str(deleted.value)
    with pytest.raises(TypeError) as missing:
        cls(*args, *range(9), **kwargs)
    seen["too_many_error"] = str(missing.value).split(".")[-1]
    return seen


@pytest.mark.parametrize("name", list(ARGS))
def test_a_record_behaves_as_a_frozen_dataclass(name: str) -> None:
    args, kwargs = ARGS[name]
    made = observe(MADE["record"][name], args, kwargs)
    reference = observe(MADE["dataclass"][name], args, kwargs)
    assert repr(made).replace("Record", "") == repr(reference).replace("Dataclass", "")


def test_fields_that_differ_only_where_they_are_not_compared_are_equal() -> None:
    for made in MADE.values():
        defaults = made["Defaults"]
        assert defaults("a", loose=1) == defaults("a", loose=2)
        assert hash(defaults("a", unhashed=1)) == hash(defaults("a", unhashed=2))
        assert defaults("a", unhashed=1) != defaults("a", unhashed=2)
        # Each instance gets a list of its own from the factory.
        assert defaults("a").notes is not defaults("a").notes


def test_a_record_refuses_what_a_dataclass_refuses() -> None:
    for decorate in (record, dataclasses.dataclass(frozen=True)):
        with pytest.raises(ValueError, match="mutable default"):

            @decorate
            class Mutable:
                items: list[str] = []

        with pytest.raises(TypeError, match="non-default argument 'b' follows default"):

            @decorate
            class Order:
                a: int = 0
                b: int


def test_what_a_record_does_not_make_itself_dataclasses_makes() -> None:
    """``__post_init__`` and ``init=False`` are left to dataclasses (the result is the same)."""

    @record
    class Checked:
        value: int
        double: int = field(init=False, default=0)

        def __post_init__(self) -> None:
            object.__setattr__(self, "double", self.value * 2)

    assert Checked(2).double == 4
    assert repr(Checked(2)).endswith("Checked(value=2, double=4)")


def mutable_shapes(decorate: Any) -> list[type]:
    @decorate
    class Small:
        name: str
        items: list[str] = field(default_factory=list)
        count: int = 0

    namespace = {
        "__annotations__": {**dict.fromkeys(WIDE, "int"), "last": "list[int]"},
        "last": field(default_factory=list),
    }
    return [Small, decorate(type("Wide", (), namespace))]


@pytest.mark.parametrize("index", [0, 1], ids=["from a template", "compiled"])
def test_a_mutable_record_behaves_as_a_dataclass(index: int) -> None:
    def observe(cls: type) -> dict[str, Any]:
        args = ("a",) if index == 0 else tuple(range(30))
        obj, other = cls(*args), cls(*args)
        first = dataclasses.fields(obj)[0].name
        setattr(obj, first, "changed")
        return {
            "repr": repr(obj).split(".")[-1],
            "signature": str(inspect.signature(cls)),
            "assigned": getattr(obj, first),
            "eq_after_change": obj == other,
            "fresh_defaults": obj.items is not other.items if index == 0 else None,
            "hash": cls.__hash__,
            "asdict": dataclasses.asdict(other),
        }

    made = observe(mutable_shapes(record(frozen=False))[index])
    assert made == observe(mutable_shapes(dataclasses.dataclass)[index])


def test_the_init_templates_are_the_generated_ones() -> None:
    """promoter/recordinits.py is written by promoter.records.templates_module. After a change
    there, write it again with ``.venv/bin/python -c "from promoter.records import
    templates_module as t; open('promoter/recordinits.py', 'w').write(t())"``."""
    from promoter import records

    written = (Path(records.__file__).parent / "recordinits.py").read_text()
    assert written == records.templates_module()
