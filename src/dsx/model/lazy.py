"""`cached_property` without a lock: computed once per instance, then read from the instance.

Why not `functools.cached_property`: on Python 3.11 it takes one lock per property for every
instance of the class (removed in 3.12 for this reason). `HealthEvent.idempotency_key` is
computed by the sentinel's ingest threads, its group commit and its stage workers at once;
under a flood the class-wide lock was the sentinel's hottest line (a third of its samples),
and a fault's key waited behind every key of the flood. Two threads that race compute the same
value twice at worst; the values here are pure functions of a frozen instance.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class cached_property(Generic[T]):
    def __init__(self, compute: Callable[[Any], T]) -> None:
        self._compute = compute
        self._name = compute.__name__
        self.__doc__ = compute.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> cached_property[T]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> T: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> T | cached_property[T]:
        if instance is None:
            return self
        value = self._compute(instance)
        instance.__dict__[self._name] = value  # later reads find it on the instance, not here
        return value
