"""What every `--json` document shares: a pydantic model whose first field is its schema
version (`gpucluster-NAME/vN`, a literal), dumped to exactly the JSON the commands have always
printed.

Numbers are `Num` (int | float), not `float`: pydantic turns an int into a float for a `float`
field, and `5` would then print as `5.0`: a change every consumer would see."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_serializer

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
    come from a dataclass): the known keys are typed, others are kept as they are."""
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class Document(Strict):
    """A whole document. `dump()` is what `--json` prints (before print_json turns an infinite
    number into null)."""

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)
