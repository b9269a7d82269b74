//! Markdown to HTML for transcripts and files, safe to put in a page: raw HTML in the text is
//! shown as text, links keep only `http`, `https`, `mailto` and relative targets (never
//! `javascript:`), and images become links (a transcript must not make the browser fetch
//! anything on its own). The rest, text and attribute values, pulldown-cmark escapes.

use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd, html};

/// `text`, a Markdown document, as HTML that holds no markup the text did not ask for as
/// Markdown.
pub fn to_html(text: &str) -> String {
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_GFM;
    let events = Parser::new_ext(text, options).map(|event| match event {
        Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
        // An image is shown as a link to it, so a transcript never makes the browser fetch.
        Event::Start(
            Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            }
            | Tag::Image {
                link_type,
                dest_url,
                title,
                id,
            },
        ) => Event::Start(Tag::Link {
            link_type,
            dest_url: safe_url(dest_url),
            title,
            id,
        }),
        Event::End(TagEnd::Image) => Event::End(TagEnd::Link),
        other => other,
    });
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    html::push_html(&mut out, events);
    out
}

/// A link's target if it is one a page may follow, else `#`.
fn safe_url(url: CowStr<'_>) -> CowStr<'_> {
    let lower = url.trim().to_ascii_lowercase();
    let scheme_end = lower.find(':');
    let path_start = lower.find(['/', '?', '#']);
    let relative = match (scheme_end, path_start) {
        (None, _) => true,
        (Some(colon), Some(slash)) => slash < colon,
        (Some(_), None) => false,
    };
    let safe = relative
        || lower.starts_with("http://")
        || lower.starts_with("https://")
        || lower.starts_with("mailto:");
    if safe { url } else { CowStr::Borrowed("#") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_html_is_text() {
        let out = to_html("hi <script>alert(1)</script>\n\n<img src=x onerror=alert(2)>");
        assert!(!out.contains("<script"), "{out}");
        assert!(!out.contains("<img"), "{out}");
        assert!(
            out.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{out}"
        );
        assert!(out.contains("&lt;img src=x onerror=alert(2)&gt;"), "{out}");
    }

    #[test]
    fn links_keep_safe_schemes_only() {
        let out = to_html(
            "[a](javascript:alert(1)) [b](https://example.com) [c](docs/x.md) [d]( JavaScript:x) [e](data:text/html,x)",
        );
        assert!(!out.to_lowercase().contains("javascript:"), "{out}");
        assert!(!out.contains("data:"), "{out}");
        assert!(out.contains("href=\"https://example.com\""), "{out}");
        assert!(out.contains("href=\"docs/x.md\""), "{out}");
    }

    #[test]
    fn images_become_links() {
        let out = to_html("![cat](https://example.com/cat.png \"a cat\")");
        assert!(!out.contains("<img"), "{out}");
        assert!(
            out.contains("<a href=\"https://example.com/cat.png\""),
            "{out}"
        );
    }

    #[test]
    fn markdown_still_renders() {
        let out = to_html(
            "# Title\n\n**bold** and `code`\n\n```rust\nfn main() {}\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n",
        );
        assert!(out.contains("<h1>Title</h1>"), "{out}");
        assert!(out.contains("<strong>bold</strong>"), "{out}");
        assert!(out.contains("<code>code</code>"), "{out}");
        assert!(out.contains("<table>"), "{out}");
    }
}
