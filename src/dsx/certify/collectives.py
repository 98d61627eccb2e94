"""nccl-tests buffer arithmetic the local workers need: element counts per collective.

The reported size is the whole buffer; the count column is per rank for the collectives that
split the buffer across ranks (all-gather, reduce-scatter, all-to-all), per buffer otherwise.
Bus-bandwidth factors live with the parser (`dsx.certify.parsing.nccl.busbw_factor`).
"""

from __future__ import annotations

from dsx.model.certification import Collective

TYPE_SIZES = {"float": 4, "double": 8, "half": 2, "bfloat16": 2, "int32": 4, "int64": 8, "uint8": 1, "int8": 1}
SPLIT = frozenset({Collective.ALL_GATHER, Collective.ALLTOALL, Collective.REDUCE_SCATTER})


def count(collective: Collective, size_bytes: int, ranks: int, type_size: int) -> int:
    elements = size_bytes // type_size
    return elements // ranks if collective in SPLIT else elements


def buffer_bytes(collective: Collective, size_bytes: int, ranks: int, type_size: int) -> int:
    """The size actually moved: a whole number of elements (and of per-rank chunks)."""
    return count(collective, size_bytes, ranks, type_size) * type_size * (ranks if collective in SPLIT else 1)


def redop(collective: Collective) -> str:
    return "sum" if collective in (Collective.ALL_REDUCE, Collective.REDUCE_SCATTER) else "none"


def root(collective: Collective) -> int:
    return 0 if collective is Collective.BROADCAST else -1
