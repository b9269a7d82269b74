//! Identifiers that arrive from outside (CLI, MCP, ACP, HTTP) and the rules that make them safe.
//!
//! Workspace and session ids name folders on disk, so they are restricted to a portable,
//! traversal-free alphabet. Device ids never name a folder and only need to be printable and
//! bounded. Each type can only be built through validation, so a function that takes a
//! `WorkspaceId` never has to wonder whether it holds `../../etc`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why an identifier or path from outside was refused. The message is meant for the person or
/// model that sent it, so it says what the rule is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} {value:?}: {rule}")]
pub struct InvalidInput {
    pub kind: &'static str,
    pub value: String,
    pub rule: String,
}

impl crate::Kinded for InvalidInput {
    fn kind(&self) -> crate::ErrorKind {
        crate::ErrorKind::Invalid
    }
}

impl InvalidInput {
    pub(crate) fn new(kind: &'static str, value: &str, rule: impl Into<String>) -> Self {
        // Echo at most a bounded, printable rendering of what was sent: the value may be huge or
        // contain control characters that would garble a terminal.
        let mut shown: String = value.chars().take(80).collect();
        if value.chars().count() > 80 {
            shown.push('…');
        }
        InvalidInput {
            kind,
            value: shown,
            rule: rule.into(),
        }
    }
}

/// The bytes a folder's name may hold, looked up: a listing checks ten thousand ids, and the
/// table is several times faster than the comparisons it stands for.
const FOLDER_NAME_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        table[i] = b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-';
        i += 1;
    }
    table
};

/// The rule shared by everything that names a folder: `[A-Za-z0-9][A-Za-z0-9._-]{0,max-1}`.
/// A leading alphanumeric rules out `.`, `..`, hidden files and option-like `-x`.
fn check_folder_name(kind: &'static str, value: &str, max: usize) -> Result<(), InvalidInput> {
    let rule = || {
        format!(
            "must be 1-{max} characters of A-Z, a-z, 0-9, '.', '_' or '-', starting with a letter or digit"
        )
    };
    let bytes = value.as_bytes();
    if bytes.is_empty() || bytes.len() > max || !bytes[0].is_ascii_alphanumeric() {
        return Err(InvalidInput::new(kind, value, rule()));
    }
    if !bytes.iter().all(|&b| FOLDER_NAME_BYTES[usize::from(b)]) {
        return Err(InvalidInput::new(kind, value, rule()));
    }
    Ok(())
}

macro_rules! validated_string {
    ($(#[$doc:meta])* $name:ident, $kind:literal, $check:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(String);

        impl $name {
            /// Validates `value`; the error says which rule it broke.
            pub fn new(value: impl Into<String>) -> Result<Self, InvalidInput> {
                let value = value.into();
                Self::check(&value)?;
                Ok(Self(value))
            }

            /// [`Self::new`]'s check alone, for text that stays where it is (a listing's
            /// record, copied out as JSON).
            pub fn check(value: &str) -> Result<(), InvalidInput> {
                let check: fn(&str) -> Result<(), InvalidInput> = $check;
                check(value)
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl FromStr for $name {
            type Err = InvalidInput;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::new(s)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let raw = String::deserialize(d)?;
                Self::new(raw).map_err(serde::de::Error::custom)
            }
        }
    };
}

validated_string!(
    /// A workspace id: a UUID v4 by default, or a client-provided id such as a mobile app's
    /// persistent session id. It names the folder `workspaces/<id>/`.
    WorkspaceId,
    "workspace id",
    |v| check_folder_name("workspace id", v, 128)
);

validated_string!(
    /// A session id. It names the folder `sessions/<id>/` inside its workspace.
    SessionId,
    "session id",
    |v| check_folder_name("session id", v, 128)
);

validated_string!(
    /// A workspace's human name. Names are unique within a home and become part of git branch
    /// names (`berth/<name>`) and index file names, so they follow the folder-name rule too.
    WorkspaceName,
    "workspace name",
    |v| check_folder_name("workspace name", v, 64)
);

validated_string!(
    /// A device or client identifier. It never names a folder (bindings map it to a workspace),
    /// so any text is allowed except control characters, up to 256 bytes.
    DeviceId,
    "device id",
    |v| {
        if v.is_empty() || v.len() > 256 {
            return Err(InvalidInput::new("device id", v, "must be 1-256 bytes"));
        }
        if v.chars().any(char::is_control) {
            return Err(InvalidInput::new("device id", v, "must not contain control characters"));
        }
        Ok(())
    }
);

impl WorkspaceId {
    /// The well-known workspace for single-user CLI use; never garbage-collected.
    pub fn default_workspace() -> Self {
        WorkspaceId("default".to_owned())
    }

    pub fn is_default(&self) -> bool {
        self.0 == "default"
    }

    /// A fresh UUID v4 id.
    pub fn generate() -> Self {
        WorkspaceId(uuid::Uuid::new_v4().to_string())
    }
}

impl SessionId {
    /// A fresh UUID v4 id.
    pub fn generate() -> Self {
        SessionId(uuid::Uuid::new_v4().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_ids_refuse_traversal_and_oddities() {
        for bad in [
            "", ".", "..", "../x", "a/b", "a\\b", "/etc", "-rf", ".hidden", "a\0b", "a b", "é",
            "a\nb",
        ] {
            assert!(WorkspaceId::new(bad).is_err(), "{bad:?} accepted");
            assert!(SessionId::new(bad).is_err(), "{bad:?} accepted");
        }
        assert!(WorkspaceId::new("x".repeat(129)).is_err());
        for good in [
            "default",
            "a",
            "550e8400-e29b-41d4-a716-446655440000",
            "ws_1.2-x",
        ] {
            assert_eq!(WorkspaceId::new(good).unwrap().as_str(), good);
        }
        assert!(WorkspaceId::new("x".repeat(128)).is_ok());
        assert!(WorkspaceName::new("x".repeat(65)).is_err());
    }

    #[test]
    fn device_ids_are_opaque_but_bounded() {
        assert!(DeviceId::new("../../anything goes: ü").is_ok());
        assert!(DeviceId::new("").is_err());
        assert!(DeviceId::new("a\u{7}b").is_err());
        assert!(DeviceId::new("x".repeat(257)).is_err());
    }

    #[test]
    fn deserializing_validates() {
        let ok: WorkspaceId = serde_json::from_str("\"abc\"").unwrap();
        assert_eq!(ok.as_str(), "abc");
        let err = serde_json::from_str::<WorkspaceId>("\"../x\"").unwrap_err();
        assert!(err.to_string().contains("workspace id"), "{err}");
    }

    #[test]
    fn error_echo_is_bounded() {
        let err = WorkspaceId::new("y".repeat(1000)).unwrap_err();
        assert!(err.to_string().len() < 300);
    }
}
