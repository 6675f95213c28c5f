"""Named classes of one kind (model families, visual encoders, first-stage backends): the built-in
modules are imported on first use, other packages' classes come through an entry-point group."""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T", bound=type)


class Registry(Generic[T]):
    def __init__(self, attr: str, group: str, builtin: tuple[str, ...], unique: bool = False):
        self.attr, self.group, self.builtin, self.unique = attr, group, builtin, unique
        self.classes: dict[str, T] = {}
        self._loaded = False

    def register(self, cls: T) -> T:
        """Class decorator: make ``cls`` available under its ``attr`` (``unique``: a second class of one
        name is an error)."""
        name = getattr(cls, self.attr, "")
        if not name:
            raise TypeError(f"{cls.__name__} has no {self.attr}")
        if self.unique and name in self.classes and self.classes[name] is not cls:
            raise ValueError(f"{name!r} is registered twice ({self.classes[name].__name__}, {cls.__name__})")
        self.classes[name] = cls
        return cls

    def load(self) -> dict[str, T]:
        if not self._loaded:
            import importlib
            from importlib.metadata import entry_points

            for mod in self.builtin:
                importlib.import_module(mod)
            for ep in entry_points(group=self.group):
                self.register(ep.load())
            self._loaded = True
        return self.classes

    def names(self) -> list[str]:
        return sorted(self.load())
