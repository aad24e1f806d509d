//! Errors: every failure carries a stable [`ErrorCode`] and a message.

use std::fmt;

/// The stable error codes of cairn (`cairn.h`, `PROTOCOL.md` §7). A code the
/// binding does not know yet (from a newer library) is kept in `Other`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// `internal`: I/O failure, broken invariant.
    Internal,
    /// `invalid_argument`: bad params, bad JSON, unknown field.
    InvalidArgument,
    /// `not_found`.
    NotFound,
    /// `conflict`: expect_generation mismatch, id taken.
    Conflict,
    /// `schema_unsupported`: a newer schema_version.
    SchemaUnsupported,
    /// `too_large`.
    TooLarge,
    /// `no_checkpoint`: resume_run of a run without a loop checkpoint.
    NoCheckpoint,
    /// `not_owner`: the run belongs to another session.
    NotOwner,
    /// `step_identity_changed`: a recorded workflow step has another identity.
    StepIdentityChanged,
    /// `locked`: another process holds the workspace store.
    Locked,
    /// `unavailable`: no daemon, connection lost, shutting down.
    Unavailable,
    /// `forked`: called in a forked child (the fork rule of `cairn.h`).
    Forked,
    /// `bad_handle`: unknown or closed handle.
    BadHandle,
    /// `method_not_found`.
    MethodNotFound,
    /// `bad_request`: the daemon rejected the message.
    BadRequest,
    /// `bad_ticket`: `cairn_take` of an unknown, unfinished or already taken
    /// ticket (raw `cairn-sys` calls only).
    BadTicket,
    /// `corrupt`: a log or file of the store is damaged (bytes that fail
    /// their checksum with intact data after them); see `cairn verify` and
    /// `cairn repair`.
    Corrupt,
    /// `no_space`: the file system is full (or the quota or file size limit
    /// is reached); nothing was written, retry after freeing space.
    NoSpace,
    /// Any other code, as the library spelt it.
    Other(String),
}

impl ErrorCode {
    /// Every code this binding knows, in the order of `cairn.h`.
    pub const ALL: [ErrorCode; 18] = [
        ErrorCode::Internal,
        ErrorCode::InvalidArgument,
        ErrorCode::NotFound,
        ErrorCode::Conflict,
        ErrorCode::SchemaUnsupported,
        ErrorCode::TooLarge,
        ErrorCode::NoCheckpoint,
        ErrorCode::NotOwner,
        ErrorCode::StepIdentityChanged,
        ErrorCode::Locked,
        ErrorCode::Unavailable,
        ErrorCode::Forked,
        ErrorCode::BadHandle,
        ErrorCode::MethodNotFound,
        ErrorCode::BadRequest,
        ErrorCode::BadTicket,
        ErrorCode::Corrupt,
        ErrorCode::NoSpace,
    ];

    /// The wire spelling, e.g. `"not_found"`.
    pub fn as_str(&self) -> &str {
        match self {
            ErrorCode::Internal => "internal",
            ErrorCode::InvalidArgument => "invalid_argument",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Conflict => "conflict",
            ErrorCode::SchemaUnsupported => "schema_unsupported",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::NoCheckpoint => "no_checkpoint",
            ErrorCode::NotOwner => "not_owner",
            ErrorCode::StepIdentityChanged => "step_identity_changed",
            ErrorCode::Locked => "locked",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Forked => "forked",
            ErrorCode::BadHandle => "bad_handle",
            ErrorCode::MethodNotFound => "method_not_found",
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::BadTicket => "bad_ticket",
            ErrorCode::Corrupt => "corrupt",
            ErrorCode::NoSpace => "no_space",
            ErrorCode::Other(s) => s,
        }
    }

    /// Parses a wire code; unknown codes become `Other`.
    pub fn from_code(s: &str) -> ErrorCode {
        ErrorCode::ALL
            .iter()
            .find(|c| c.as_str() == s)
            .cloned()
            .unwrap_or_else(|| ErrorCode::Other(s.to_owned()))
    }

    /// The code of a `CAIRN_E_*` return value.
    pub fn from_rc(rc: i32) -> ErrorCode {
        use cairn_sys::*;
        match rc {
            CAIRN_E_INTERNAL => ErrorCode::Internal,
            CAIRN_E_INVALID_ARGUMENT => ErrorCode::InvalidArgument,
            CAIRN_E_NOT_FOUND => ErrorCode::NotFound,
            CAIRN_E_CONFLICT => ErrorCode::Conflict,
            CAIRN_E_SCHEMA_UNSUPPORTED => ErrorCode::SchemaUnsupported,
            CAIRN_E_TOO_LARGE => ErrorCode::TooLarge,
            CAIRN_E_NO_CHECKPOINT => ErrorCode::NoCheckpoint,
            CAIRN_E_NOT_OWNER => ErrorCode::NotOwner,
            CAIRN_E_STEP_IDENTITY_CHANGED => ErrorCode::StepIdentityChanged,
            CAIRN_E_LOCKED => ErrorCode::Locked,
            CAIRN_E_UNAVAILABLE => ErrorCode::Unavailable,
            CAIRN_E_FORKED => ErrorCode::Forked,
            CAIRN_E_BAD_HANDLE => ErrorCode::BadHandle,
            CAIRN_E_METHOD_NOT_FOUND => ErrorCode::MethodNotFound,
            CAIRN_E_BAD_REQUEST => ErrorCode::BadRequest,
            CAIRN_E_BAD_TICKET => ErrorCode::BadTicket,
            CAIRN_E_CORRUPT => ErrorCode::Corrupt,
            CAIRN_E_NO_SPACE => ErrorCode::NoSpace,
            _ => ErrorCode::Other(format!("rc {rc}")),
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed cairn call: the stable `code` and the library's `message`.
///
/// Failures of the binding itself use the same codes: a request that cannot
/// be encoded is `InvalidArgument`, a result that cannot be decoded is
/// `Internal`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// The stable code; match on it.
    pub code: ErrorCode,
    /// What went wrong, for people.
    pub message: String,
}

impl Error {
    /// Makes an error.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Error {
        Error {
            code,
            message: message.into(),
        }
    }

    /// Builds the error of a failed C call from its return code and its err
    /// JSON `{"code", "message"}`.
    pub(crate) fn from_call(rc: i32, err_json: &[u8]) -> Error {
        #[derive(serde::Deserialize)]
        struct Wire {
            #[serde(default)]
            code: String,
            #[serde(default)]
            message: String,
        }
        match serde_json::from_slice::<Wire>(err_json) {
            Ok(w) if !w.code.is_empty() => Error {
                code: ErrorCode::from_code(&w.code),
                message: w.message,
            },
            _ => Error {
                code: ErrorCode::from_rc(rc),
                message: if err_json.is_empty() {
                    format!("libcairn returned {rc} without an error text")
                } else {
                    String::from_utf8_lossy(err_json).into_owned()
                },
            },
        }
    }

    pub(crate) fn encode(what: &str, e: serde_json::Error) -> Error {
        Error::new(ErrorCode::InvalidArgument, format!("encoding {what}: {e}"))
    }

    pub(crate) fn decode(what: &str, e: serde_json::Error) -> Error {
        Error::new(
            ErrorCode::Internal,
            format!("decoding the result of {what}: {e}"),
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cairn: {}: {}", self.code, self.message)
    }
}

impl std::error::Error for Error {}

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
