//! The frame every page shares (head, navigation, the CSRF token for the script), the pages
//! without a viewer (login, pairing, errors), and the headers that keep a page to itself.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};

use crate::{Reach, Viewer};

/// Scripts and styles come from this server's files only, never from inline text: even a
/// string that slipped past escaping could not run. Nothing may frame the page.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// A page as a response: HTML, with the headers that keep it to itself.
pub struct Page {
    status: StatusCode,
    body: Markup,
}

impl IntoResponse for Page {
    fn into_response(self) -> Response {
        let mut response = (self.status, self.body.into_string()).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        );
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        );
        headers.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        // Not `no-referrer`: under it a browser sends `Origin: null` with the page's own
        // POSTs, and the guard refuses those.
        headers.insert(
            header::REFERRER_POLICY,
            HeaderValue::from_static("same-origin"),
        );
        // Pages show what changes; a back button must not show a stale one.
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        response
    }
}

/// A page of the site, for `viewer`: `kind` names it for the script (`data-page`).
pub fn page(viewer: &Viewer, kind: &str, title: &str, body: Markup) -> Page {
    Page {
        status: StatusCode::OK,
        body: frame(Some(viewer), kind, title, body),
    }
}

fn frame(viewer: Option<&Viewer>, kind: &str, title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light dark";
                @if let Some(v) = viewer {
                    meta name="berth-csrf" content=(v.csrf);
                }
                title { (title) " · berth" }
                // No icon to fetch (a request for /favicon.ico would need a token).
                link rel="icon" href="data:,";
                link rel="stylesheet" href="/assets/berth.css";
                script src="/assets/berth.js" defer {}
            }
            body data-page=(kind) {
                header.top {
                    a.brand href="/" { "berth" }
                    @if let Some(v) = viewer {
                        nav {
                            a href="/" { "Workspaces" }
                            @if v.reach == Reach::All {
                                a href="/runs" { "Runs" }
                            }
                        }
                    }
                }
                main { (body) }
            }
        }
    }
}

/// The page that asks for a token, answered with `status` (401 where one was needed).
pub fn login_page(status: StatusCode, problem: Option<&str>) -> Response {
    let body = html! {
        h1 { "Sign in" }
        p { "This berth server needs a token. Where to find one, on the server's machine:" }
        ul.token-sources {
            li { "the token " code { "berth serve" } " printed when it started, with a link that signs you in;" }
            li { "the " code { "BERTH_SERVE_TOKEN" } " it was started with;" }
            li { "a new one: " code { "berth token create --device NAME" } " (or " code { "--admin NAME" } ");" }
            li { "for a phone, the pairing link " code { "berth serve --pair NAME" } " prints." }
        }
        @if let Some(problem) = problem {
            p.problem role="alert" { (problem) }
        }
        form.login method="post" action="/login" {
            label for="token" { "Token" }
            input #token type="password" name="token" autocomplete="current-password" required;
            button type="submit" { "Sign in" }
        }
    };
    Page {
        status,
        body: frame(None, "login", "Sign in", body),
    }
    .into_response()
}

/// The page a pairing link opens: its script hands the token in the link's fragment (which
/// no server log or `Referer` ever sees) to `/login`, then goes to the workspaces.
pub fn pair_page() -> Response {
    let body = html! {
        h1 { "Pairing…" }
        p #pair-status { "Signing this browser in." }
        noscript { p { "This page needs JavaScript to read the link; paste the token on " a href="/login" { "the sign-in page" } " instead." } }
    };
    Page {
        status: StatusCode::OK,
        body: frame(None, "pair", "Pairing", body),
    }
    .into_response()
}

/// What a failed page shows.
pub fn error_page(status: StatusCode, message: &str) -> Page {
    let body = html! {
        h1 { (status.canonical_reason().unwrap_or("Error")) }
        p.problem role="alert" { (message) }
        p { a href="/" { "Back to the workspaces" } }
    };
    Page {
        status,
        body: frame(None, "error", "Error", body),
    }
}

/// `value` made safe for a URL's query or path segment.
pub fn encode(value: &str) -> String {
    percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// "3 minutes ago"-style age of a time, for tables.
pub fn age(at: chrono::DateTime<chrono::Utc>) -> String {
    let secs = (chrono::Utc::now() - at).num_seconds().max(0);
    match secs {
        0..60 => "just now".to_owned(),
        60..3600 => format!("{} min ago", secs / 60),
        3600..86400 => format!("{} h ago", secs / 3600),
        _ => format!("{} days ago", secs / 86400),
    }
}
