"""Workload: one set of axis values, input sources and tolerance. See formats.md."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class RandomInput(_Strict):
    type: Literal["random"]


class ScalarInput(_Strict):
    type: Literal["scalar"]
    value: int | float | bool


class SafetensorsInput(_Strict):
    type: Literal["safetensors"]
    path: str
    tensor_key: str


class CustomInput(_Strict):
    type: Literal["custom"]


InputSource = Annotated[
    Union[RandomInput, ScalarInput, SafetensorsInput, CustomInput], Field(discriminator="type")
]


class Tolerance(_Strict):
    """Upstream tolerance rule (compatibility mode). Source: formats.md.

    An element matches when ``|a-b| <= max_atol + max_rtol*|b|``; an output passes when the
    matched share is >= ``required_matched_ratio`` and, if set, ``max|a-b| <= max_error_cap``.
    """

    max_atol: float = 1e-2
    max_rtol: float = 1e-2
    required_matched_ratio: float = Field(
        0.99, validation_alias=AliasChoices("required_matched_ratio", "required_match_ratio")
    )
    max_error_cap: float | None = None
    allow_negative_inf: bool = False

    @model_validator(mode="after")
    def _ranges(self):
        if self.max_atol < 0 or self.max_rtol < 0:
            raise ValueError("max_atol and max_rtol must be >= 0")
        if not 0 <= self.required_matched_ratio <= 1:
            raise ValueError("required_matched_ratio must be within [0, 1]")
        return self


class Workload(_Strict):
    """One line of workload.jsonl."""

    uuid: str
    axes: dict[str, int] = Field(default_factory=dict)
    inputs: dict[str, InputSource]
    tolerance: Tolerance | None = None
    #: solbench extension: free-form labels (e.g. "cpu" for CPU-sized workloads)
    tags: list[str] | None = None

    @model_validator(mode="after")
    def _custom(self):
        kinds = {type(s) for s in self.inputs.values()}
        if CustomInput in kinds and len(kinds) > 1:
            raise ValueError("inputs: a workload is either all-custom or has no custom input")
        return self

    @property
    def is_custom(self) -> bool:
        return any(isinstance(s, CustomInput) for s in self.inputs.values())

    def tolerance_or_default(self) -> Tolerance:
        return self.tolerance or Tolerance()

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)
