//! Pairing a new device (`berth serve --pair NAME`): a device token is made, and a link that
//! carries where the server is and the token is printed, with its QR code for a phone's
//! camera. The link is `berth://pair?url=<the /acp WebSocket>&device=<NAME>&token=<token>`,
//! every value percent-encoded; an app that opens it has all it needs to connect.

use qrcode::QrCode;
use qrcode::render::unicode::Dense1x2;

/// The pairing link of a device to the `/acp` endpoint `url`.
pub fn link(url: &str, device: &str, token: &str) -> String {
    format!(
        "berth://pair?url={}&device={}&token={}",
        encode(url),
        encode(device),
        encode(token)
    )
}

/// The link that signs a browser in to the web page at `base` (`http://host:port`): the token
/// rides in the fragment, which a browser never sends to a server or in a `Referer`.
pub fn web_link(base: &str, token: &str) -> String {
    format!(
        "{}/pair#token={}",
        base.trim_end_matches('/'),
        encode(token)
    )
}

/// `text` as a QR code drawn with Unicode half blocks, dark on light, two rows of modules a
/// line, with its quiet zone; `None` when it is too long for any QR code.
pub fn qr(text: &str) -> Option<String> {
    let code = match QrCode::new(text.as_bytes()) {
        Ok(code) => code,
        Err(e) => {
            tracing::debug!("no QR code for a pairing text of {} bytes: {e}", text.len());
            return None;
        }
    };
    Some(
        code.render::<Dense1x2>()
            .dark_color(Dense1x2::Dark)
            .light_color(Dense1x2::Light)
            .quiet_zone(true)
            .build(),
    )
}

/// Percent-encodes everything but the unreserved characters of RFC 3986.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_link_carries_everything_encoded_and_fits_a_qr_code() {
        let l = link("ws://192.168.1.5:8765/acp", "my phone", "berth_abc");
        assert_eq!(
            l,
            "berth://pair?url=ws%3A%2F%2F192.168.1.5%3A8765%2Facp&device=my%20phone&token=berth_abc"
        );
        assert_eq!(
            web_link("http://192.168.1.5:8765/", "berth_a+b"),
            "http://192.168.1.5:8765/pair#token=berth_a%2Bb"
        );
        let drawn = qr(&l).unwrap();
        assert!(drawn.lines().count() > 10);
        assert!(drawn.contains('█') || drawn.contains('▀') || drawn.contains('▄'));
    }
}
