"""Pieces shared by several payload types, and `doc`, the field-description helper.

Every payload type is a `TypedDict` whose fields carry `Annotated[T, doc("...")]`: msgspec turns
the text into the field's `description` in the JSON schema (so in `openapi.yaml` and the
frontend's generated types). Times are microseconds (us) of the trace's clock unless a field
says otherwise; sizes are bytes.
"""

from typing import Annotated

from msgspec import Meta
from typing_extensions import TypedDict


def doc(text: str) -> Meta:
    """The description of one field (or type) in the generated schema."""
    return Meta(description=text)


ViewName = Annotated[str, doc("A view (tab) name of `/viewspecs`, e.g. `Overview`, `Kernel`.")]
"""The display names of the views, as `/views` lists them and `/workers?view=` takes them. Not a
closed Literal: the views are the registry's (`tb_plugin.views`), and a new one must not need a
second list here."""


class PieSlice(TypedDict):
    """One slice of a top-N pie chart."""

    name: Annotated[str, doc("The slice's label (operator or kernel name).")]
    value: Annotated[float, doc("Time in us (3 decimals), > 0.")]
