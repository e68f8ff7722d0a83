"""Solution: a candidate implementation (solution.json). See formats.md."""

from __future__ import annotations

import posixpath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .. import languages as _languages


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class CompileOptions(_Strict):
    cflags: list[str] = Field(default_factory=list)
    cuda_cflags: list[str] = Field(default_factory=list)
    ld_flags: list[str] = Field(default_factory=list)


class BuildSpec(_Strict):
    languages: list[str]
    target_hardware: list[str] = Field(default_factory=list)
    entry_point: str
    destination_passing_style: bool = True
    compile_options: CompileOptions | None = None
    dependencies: list[str] | None = None
    binding: Literal["torch"] | None = None

    @field_validator("languages")
    @classmethod
    def _langs(cls, v: list[str]) -> list[str]:
        reg = _languages
        v = [x.lower() for x in v]
        if not v:
            raise ValueError("at least one language is required")
        unknown = sorted({x for x in v if reg.canonical(x) is None})
        if unknown:
            raise ValueError(f"unknown languages {unknown}; expected from {reg.accepted_names()}")
        families = {reg.get(x).family for x in v}
        if len(families) > 1:
            raise ValueError("Python-family and C++-family languages cannot be mixed")
        return v

    @field_validator("entry_point")
    @classmethod
    def _entry(cls, v: str) -> str:
        if "::" not in v:
            raise ValueError(f"{v!r} must look like 'file.py::function'")
        return v

    @model_validator(mode="after")
    def _language_rules(self):
        for lang in _languages.for_languages(self.languages):
            lang.validate_spec(self)
        return self

    @property
    def language(self):
        """The plug-in (:class:`solbench.languages.Language`) that builds this."""
        return _languages.primary(self.languages)

    @property
    def is_cpp(self) -> bool:
        return self.language.family == "cpp"

    @property
    def entry_file(self) -> str:
        return self.entry_point.split("::", 1)[0]

    @property
    def entry_symbol(self) -> str:
        return self.entry_point.split("::", 1)[1]


class SourceFile(_Strict):
    path: str
    content: str = ""

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        norm = posixpath.normpath(v)
        if v.startswith("/") or norm.startswith("..") or "/../" in f"/{v}/" or not v:
            raise ValueError(f"source path {v!r} must be relative and stay inside the solution")
        return v


class Solution(_Strict):
    """A candidate. ``kind`` is a solbench extension: "kernelbench" marks a ModelNew file."""

    name: str
    definition: str
    author: str = "unknown"
    description: str | None = None
    spec: BuildSpec
    sources: list[SourceFile]

    @model_validator(mode="after")
    def _sources(self):
        paths = [s.path for s in self.sources]
        dup = {p for p in paths if paths.count(p) > 1}
        if dup:
            raise ValueError(f"sources: duplicate paths {sorted(dup)}")
        if self.spec.entry_file not in paths:
            raise ValueError(
                f"spec.entry_point: file {self.spec.entry_file!r} is not among sources {paths}"
            )
        return self

    def source(self, path: str) -> str:
        for s in self.sources:
            if s.path == path:
                return s.content
        raise KeyError(path)

    def content_hash(self) -> str:
        """sha256 over the spec and sources (stable key for caches and resumable runs)."""
        import hashlib
        import json

        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()
