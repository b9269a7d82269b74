//! The Postgres server the tests of the Postgres store use: `./test.sh` starts a throwaway one
//! (`tests/postgres.sh`) and names it in `TEST_BERTH_POSTGRES_URL`. A test that needs it and
//! finds no server fails, saying how to get one: it never skips.

use sqlx::Connection;

/// The variable that names the test server.
pub const URL_VAR: &str = "TEST_BERTH_POSTGRES_URL";

/// The test server's URL; panics with what to do when it is not set.
pub fn url() -> String {
    std::env::var(URL_VAR).unwrap_or_else(|_| {
        panic!(
            "{URL_VAR} is not set: this test needs a Postgres server. Run ./test.sh, which \
             starts a throwaway one, or `eval \"$(tests/postgres.sh start)\"` first"
        )
    })
}

/// A new, empty database on the test server; its URL.
pub async fn fresh_database() -> String {
    let base = url();
    let name = format!(
        "berth_t_{:x}_{:x}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let mut admin = sqlx::PgConnection::connect(&base)
        .await
        .unwrap_or_else(|e| panic!("cannot reach the test server {URL_VAR}: {e}"));
    // A name of our own making, not a value from outside: the one SQL text built here.
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut admin)
        .await
        .unwrap();
    let _ = admin.close().await;
    with_database(&base, &name)
}

/// [`fresh_database`] for a test without a runtime.
pub fn fresh_database_blocking() -> String {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(fresh_database())
}

/// `url` with its database replaced by `name`.
pub fn with_database(url: &str, name: &str) -> String {
    let (before_query, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let scheme_end = before_query.find("://").map_or(0, |i| i + 3);
    let base = match before_query[scheme_end..].find('/') {
        Some(i) => &before_query[..scheme_end + i],
        None => before_query,
    };
    match query {
        Some(q) => format!("{base}/{name}?{q}"),
        None => format!("{base}/{name}"),
    }
}
