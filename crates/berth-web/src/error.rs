//! What a page shows when an operation fails: the status its kind calls for and the message,
//! which already says what to do. A script calling the page's POSTs reads the same text.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use berth_ops::ErrorKind;

use crate::page;

/// A failure of a page or a request, with the HTTP status it is answered with.
#[derive(Debug)]
pub struct PageError {
    pub status: StatusCode,
    pub message: String,
}

pub type PageResult<T> = Result<T, PageError>;

impl PageError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> PageError {
        PageError {
            status,
            message: message.into(),
        }
    }

    /// What a device is told of another's workspace or session, or of one that does not
    /// exist: the same words, so that it cannot tell the two apart.
    pub fn not_found(what: &str) -> PageError {
        PageError::new(StatusCode::NOT_FOUND, format!("no such {what}"))
    }
}

/// The status of each kind of error: the caller's mistake (4xx) or berth's trouble (5xx).
pub fn status_of(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::Invalid | ErrorKind::IsFolder => StatusCode::BAD_REQUEST,
        ErrorKind::Refused => StatusCode::FORBIDDEN,
        ErrorKind::Conflict => StatusCode::CONFLICT,
        // The server cannot do it until its person sets it up: not the page's mistake.
        ErrorKind::NotConfigured => StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::Corrupt | ErrorKind::External | ErrorKind::Io => {
            StatusCode::INTERNAL_SERVER_ERROR
        }
    }
}

impl From<berth_ops::Error> for PageError {
    fn from(e: berth_ops::Error) -> PageError {
        PageError::new(status_of(e.kind()), e.to_string())
    }
}

impl From<berth_agent::AgentError> for PageError {
    fn from(e: berth_agent::AgentError) -> PageError {
        PageError::new(status_of(e.kind()), e.to_string())
    }
}

impl From<berth_run::KeptError> for PageError {
    fn from(e: berth_run::KeptError) -> PageError {
        PageError::new(status_of(e.kind()), e.to_string())
    }
}

impl From<berth_run::RunError> for PageError {
    fn from(e: berth_run::RunError) -> PageError {
        PageError::new(status_of(e.kind()), e.to_string())
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        // berth's own trouble is the server's to see; a caller's mistake is the caller's.
        if self.status.is_server_error() {
            tracing::warn!(
                status = self.status.as_u16(),
                "a page failed: {}",
                self.message
            );
        } else {
            tracing::debug!(
                status = self.status.as_u16(),
                "a page refused: {}",
                self.message
            );
        }
        page::error_page(self.status, &self.message).into_response()
    }
}
