//! [`Secret`]: an API key, a token or a store URL, held so that printing a config, logging
//! it or writing it out never shows the value.

use std::fmt;

use serde::{Deserialize, Serialize, Serializer};

/// An API key or token. Debug, Display and Serialize all redact it; only [`Secret::expose`]
/// gives the value, so leaking one takes a deliberate call.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub const REDACTED: &'static str = "<redacted>";

    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(Self::REDACTED)
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(Self::REDACTED)
    }
}
