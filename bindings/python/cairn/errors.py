"""The exception hierarchy of cairn.

Every failed call raises a :class:`CairnError` subclass chosen by the error's
stable ``code`` (the JSON ``{"code", "message"}`` libcairn returns); the base
class is used for a code this version does not know.
"""

from __future__ import annotations

import json
from typing import Dict, Optional, Type

__all__ = [
    "CairnError",
    "InternalError",
    "InvalidArgumentError",
    "NotFoundError",
    "ConflictError",
    "SchemaUnsupportedError",
    "TooLargeError",
    "NoCheckpointError",
    "NotOwnerError",
    "StepIdentityChangedError",
    "LockedError",
    "UnavailableError",
    "ForkedError",
    "BadHandleError",
    "MethodNotFoundError",
    "BadRequestError",
    "CorruptError",
    "NoSpaceError",
    "LibraryNotFoundError",
    "ERRORS",
    "RETURN_CODES",
    "error_class",
]


class CairnError(Exception):
    """A failed cairn call: ``code`` is the stable error code, ``message`` the text."""

    code: str = ""

    def __init__(self, code: str, message: str = "") -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}" if self.message else self.code

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r}, {self.message!r})"


class InternalError(CairnError):
    """``internal``: an I/O failure or a broken invariant."""

    code = "internal"


class InvalidArgumentError(CairnError):
    """``invalid_argument``: a bad parameter (bad JSON, unknown field, missing id, ...)."""

    code = "invalid_argument"


class NotFoundError(CairnError):
    """``not_found``: no such session, run, workflow or subscription."""

    code = "not_found"


class ConflictError(CairnError):
    """``conflict``: ``expect_generation`` mismatch, or the id is taken."""

    code = "conflict"


class SchemaUnsupportedError(CairnError):
    """``schema_unsupported``: the document has a newer ``schema_version``."""

    code = "schema_unsupported"


class TooLargeError(CairnError):
    """``too_large``: the commit or message exceeds a size limit."""

    code = "too_large"


class NoCheckpointError(CairnError):
    """``no_checkpoint``: resume_run of a run that never checkpointed."""

    code = "no_checkpoint"


class NotOwnerError(CairnError):
    """``not_owner``: the run belongs to another session."""

    code = "not_owner"


class StepIdentityChangedError(CairnError):
    """``step_identity_changed``: a completed step's spec digest differs."""

    code = "step_identity_changed"


class LockedError(CairnError):
    """``locked``: another process (a daemon, or an embedded user) holds the store."""

    code = "locked"


class UnavailableError(CairnError):
    """``unavailable``: no daemon, the connection was lost, or it is shutting down."""

    code = "unavailable"


class ForkedError(CairnError):
    """``forked``: libcairn was called in a forked child (see the fork rule)."""

    code = "forked"


class BadHandleError(CairnError):
    """``bad_handle``: the client is closed (or the handle is unknown)."""

    code = "bad_handle"


class MethodNotFoundError(CairnError):
    """``method_not_found``: no such method."""

    code = "method_not_found"


class BadRequestError(CairnError):
    """``bad_request``: the daemon rejected the message."""

    code = "bad_request"


class CorruptError(CairnError):
    """``corrupt``: a log or file of the store is damaged; see ``cairn verify`` and ``cairn repair``."""

    code = "corrupt"


class NoSpaceError(CairnError):
    """``no_space``: the file system is full (or a quota or file size limit is reached).

    Nothing was written; the same call succeeds once space is freed.
    """

    code = "no_space"


class LibraryNotFoundError(OSError):
    """libcairn could not be found or loaded."""


#: Maps every stable error code to its exception class.
ERRORS: Dict[str, Type[CairnError]] = {
    cls.code: cls
    for cls in (
        InternalError,
        InvalidArgumentError,
        NotFoundError,
        ConflictError,
        SchemaUnsupportedError,
        TooLargeError,
        NoCheckpointError,
        NotOwnerError,
        StepIdentityChangedError,
        LockedError,
        UnavailableError,
        ForkedError,
        BadHandleError,
        MethodNotFoundError,
        BadRequestError,
        CorruptError,
        NoSpaceError,
    )
}

#: Maps libcairn's return codes (cairn.h's CAIRN_E_*) to error codes.
RETURN_CODES: Dict[int, str] = {
    -1: "internal",
    -2: "invalid_argument",
    -3: "not_found",
    -4: "conflict",
    -5: "schema_unsupported",
    -6: "too_large",
    -7: "no_checkpoint",
    -8: "not_owner",
    -9: "step_identity_changed",
    -10: "locked",
    -11: "unavailable",
    -12: "forked",
    -13: "bad_handle",
    -14: "method_not_found",
    -15: "bad_request",
    -17: "corrupt",
    -18: "no_space",
}


def error_class(code: str) -> Type[CairnError]:
    """Returns the exception class for ``code`` (CairnError when unknown)."""
    return ERRORS.get(code, CairnError)


def from_return(rc: int, err_json: Optional[bytes]) -> CairnError:
    """Builds the exception for return code ``rc`` and the error JSON libcairn gave."""
    code = RETURN_CODES.get(rc, "internal")
    message = ""
    if err_json:
        try:
            obj = json.loads(err_json)
            code = str(obj.get("code") or code)
            message = str(obj.get("message") or "")
        except (ValueError, AttributeError):
            message = err_json.decode("utf-8", "replace")
    else:
        message = f"libcairn returned {rc}"
    return error_class(code)(code, message)
