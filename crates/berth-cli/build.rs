//! One link flag for the release `berth` binary on Linux: the linker compresses its debug
//! sections with zlib. They are the line tables (and, with `split-debuginfo`, what stays in the
//! binary) that a panic's backtrace reads to name files and lines; std's backtrace reads zlib
//! sections (not zstd ones), and so do gdb, addr2line and perf. The release profile in the
//! workspace's Cargo.toml says why; docs/benchmarks.md has the sizes.
//!
//! A build script because a profile cannot carry a link flag on stable Rust, and a
//! `.cargo/config.toml` would pass it to every test binary of the dev profile too, whose links
//! it would slow.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    // "release" for the release profile and those that inherit it (bench).
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    if linux && release {
        println!("cargo::rustc-link-arg-bins=-Wl,--compress-debug-sections=zlib");
    }
}
