"""What every `--json` document shares: a pydantic model whose first field is its schema
version (`gpucluster-NAME/vN`, a literal), dumped to exactly the JSON the commands have always
printed.

Numbers are `Num` (int | float), not `float`: pydantic turns an int into a float for a `float`
field, and `5` would then print as `5.0`: a change every consumer would see."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, PrivateAttr, model_serializer, model_validator

Num = int | float


class Strict(BaseModel):
    """A part of a document whose keys are all known: an unknown key is an error, so a field
    added to the output without adding it here fails the tests instead of going undocumented."""
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    # Keys printed only when they hold a value (e.g. `simulation` with --simulate): dropped when None.
    OMIT_NONE: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _omit_absent(self, handler: Any) -> Any:
        out = handler(self)
        for key in self.OMIT_NONE:
            if key in out and out[key] is None:
                del out[key]
        return out


class Open(Strict):
    """A part whose keys grow with the code that writes it (simulation summaries, rows that
    come from a dataclass): the known keys are typed, others are kept as they are, in the
    place the writer put them (pydantic would dump declared fields first, extras last)."""
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    _order: list[str] | None = PrivateAttr(None)

    @model_validator(mode="wrap")
    @classmethod
    def _remember_order(cls, data: Any, handler: Any) -> Any:
        obj = handler(data)
        if isinstance(data, dict) and isinstance(obj, Open):
            obj._order = list(data)
        return obj

    @model_serializer(mode="wrap")
    def _omit_absent(self, handler: Any) -> Any:
        out = Strict._omit_absent(self, handler)
        if not self._order or not isinstance(out, dict):
            return out
        # The keys given, in the order given; a key not given (a default) after the key pydantic
        # would have put before it.
        alias = {name: info.alias or name for name, info in type(self).model_fields.items()}
        given = [alias.get(k, k) for k in self._order]
        placed = [k for k in given if k in out]
        declared = list(out)
        for i, key in enumerate(declared):
            if key not in placed:
                before = next((declared[j] for j in range(i - 1, -1, -1) if declared[j] in placed), None)
                placed.insert(placed.index(before) + 1 if before is not None else 0, key)
        return {k: out[k] for k in placed}


class Document(Strict):
    """A whole document. `dump()` is what `--json` prints (before print_json turns an infinite
    number into null)."""

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)
