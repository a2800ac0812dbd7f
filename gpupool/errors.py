"""Errors that reach the user.

Every input error names where the bad input is (file and line, or YAML document and field
path) and what was expected, because the user has to fix a file, not read a traceback.
"""
from __future__ import annotations


class GpupoolError(Exception):
    """Base class of every error gpupool raises on purpose."""


class InputError(GpupoolError):
    """Bad user input: a file, line or field that does not say what gpupool expects."""

    def __init__(
        self,
        source: str,
        message: str,
        *,
        line: int | None = None,
        document: int | None = None,
        field: str | None = None,
    ) -> None:
        self.source = str(source)
        self.message = message
        self.line = line
        self.document = document
        self.field = field
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.source
        if self.line is not None:
            where += f":{self.line}"
        parts = []
        if self.document is not None:
            parts.append(f"document {self.document}")
        if self.field:
            parts.append(f"field {self.field}")
        if parts:
            where += f" ({', '.join(parts)})"
        return f"{where}: {self.message}"


class MissingReferenceError(InputError):
    """A reference from one object to another that does not exist: names both ends."""


class InvariantViolation(GpupoolError):
    """The engine reached a state that must never happen (a bug, never bad input)."""


class PolicyNotApplicable(GpupoolError):
    """A policy that this pool cannot be run under (slurm-operator without a NodeSet).

    ``compare`` skips such a policy with this message when it runs every registered policy,
    and fails when the user named it.
    """


class PolicyOptionError(GpupoolError, ValueError):
    """An option a policy does not have, or a value it does not accept (also a ValueError,
    which is what option parsing raised before)."""
