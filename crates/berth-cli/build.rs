//! Link flags for the release `berth` binary on Linux: the linker compresses its debug
//! sections with zlib. They are the line tables (and, with `split-debuginfo`, what stays in the
//! binary) that a panic's backtrace reads to name files and lines; std's backtrace reads zlib
//! sections (not zstd ones), and so do gdb, addr2line and perf. The release profile in the
//! workspace's Cargo.toml says why; docs/benchmarks.md has the sizes.
//!
//! On x86_64 GNU/Linux the linker is rust-lld (Rust's default there since 1.90), which
//! compresses at zlib's fastest level unless told one: level 6 makes the debug sections about
//! 1 MB smaller (10.0 MB to 9.1 MB of 27 MB) for a fraction of a second of the link, and reads
//! back the same. Elsewhere the system linker may be GNU ld, which has no such option.
//!
//! A build script because a profile cannot carry a link flag on stable Rust, and a
//! `.cargo/config.toml` would pass it to every test binary of the dev profile too, whose links
//! it would slow.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let target = |key: &str, value: &str| std::env::var(key).is_ok_and(|v| v == value);
    // "release" for the release profile and those that inherit it (bench).
    let release = target("PROFILE", "release");
    if target("CARGO_CFG_TARGET_OS", "linux") && release {
        println!("cargo::rustc-link-arg-bins=-Wl,--compress-debug-sections=zlib");
        if target("CARGO_CFG_TARGET_ARCH", "x86_64") && target("CARGO_CFG_TARGET_ENV", "gnu") {
            // Every debug section but `.debug_gdb_scripts`, which is loaded with the program
            // and so may not be compressed (lld refuses).
            println!("cargo::rustc-link-arg-bins=-Wl,--compress-sections=.debug_[!g]*=zlib:6");
        }
    }
}
