//! The stylesheet and the script, embedded in the binary: a clone of the repository needs no
//! build step, and the page works offline on a phone on the same network.

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

const CSS: &str = include_str!("../assets/berth.css");
const JS: &str = include_str!("../assets/berth.js");

pub fn router() -> Router {
    Router::new()
        .route("/assets/berth.css", get(css))
        .route("/assets/berth.js", get(js))
}

async fn css() -> impl IntoResponse {
    asset("text/css; charset=utf-8", CSS)
}

async fn js() -> impl IntoResponse {
    asset("text/javascript; charset=utf-8", JS)
}

fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, content_type),
            // Revalidated each load: a new berth's page never runs an old script.
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
}
