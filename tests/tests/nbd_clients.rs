//! The NBD checks the export issue names, each with the real client: fio's
//! nbd engine writing and verifying (4 KiB and 4 KiB-1 MiB, two jobs),
//! `nbdinfo --can`, a 256 MiB `nbdcopy` round trip and `qemu-img compare`.

use std::process::Command;
use std::time::Duration;

use io_engine::env::xorshift::XorShift;
use io_engine_tests::daemon::Daemon;
use io_engine_tests::{assert_fio_verified, fio_nbd_verify_args, output_ok, output_with_timeout};

/// `program args...` as an owned command.
fn cmd<S: AsRef<std::ffi::OsStr>>(program: &str, args: impl IntoIterator<Item = S>) -> Command {
    let mut c = Command::new(program);
    c.args(args);
    c
}

/// `cmd`'s output; it must succeed within two minutes.
fn run(cmd: Command) -> std::process::Output {
    output_ok(cmd, Duration::from_secs(120))
}

#[test]
fn fio_writes_and_verifies_with_fixed_and_mixed_block_sizes() {
    let d = Daemon::start_quiet([
        "--bdev",
        "malloc:///v0?size_mb=256&blk_size=4096",
        "--share",
        "v0",
    ]);
    let uri = d.nbd_uri("v0");
    for bs in ["--bs=4k", "--bsrange=4k-1m"] {
        let out = run(cmd("fio", fio_nbd_verify_args(&uri, bs, 64)));
        assert_fio_verified(&String::from_utf8_lossy(&out.stdout), 64, bs);
    }
}

#[test]
fn nbdinfo_can_answers_per_capability() {
    let d = Daemon::start_quiet([
        "--bdev",
        "malloc:///c0?size_mb=16",
        "--bdev",
        "malloc:///r0?size_mb=16",
        "--share",
        "c0",
        "--share",
        "r0:ro",
    ]);
    let can = |what: &str, export: &str| {
        let out = output_with_timeout(
            cmd("nbdinfo", [format!("--can={what}"), d.nbd_uri(export)]),
            Duration::from_secs(20),
        );
        // nbdinfo --can: 0 yes, 2 no, anything else an error.
        match out.status.code() {
            Some(0) => true,
            Some(2) => false,
            c => panic!(
                "nbdinfo --can {what}: {c:?} {}",
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    };
    for what in ["flush", "fua", "trim", "zero", "multi-conn", "cache"] {
        assert!(can(what, "c0"), "c0 cannot {what}");
    }
    assert!(can("read", "r0"));
    assert!(!can("write", "r0"), "a read-only export claims writes");
    assert!(!can("trim", "r0"), "a read-only export claims trims");
}

#[test]
fn nbdcopy_256_mib_round_trip_and_qemu_img_compare() {
    let d = Daemon::start_quiet([
        "--bdev",
        "malloc:///big?size_mb=256&blk_size=4096",
        "--share",
        "big",
    ]);
    let uri = d.nbd_uri("big");
    let dir = std::env::temp_dir().join(format!("io-engine-nbdcopy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (src, back) = (dir.join("src.img"), dir.join("back.img"));
    // 256 MiB of pseudo-random data (a fixed xorshift* stream: reproducible).
    let mut data = vec![0u8; 256 << 20];
    XorShift::new(0x0123_4567_89ab_cdef).fill(&mut data);
    std::fs::write(&src, &data).unwrap();
    let src_s = src.display().to_string();
    let back_s = back.display().to_string();
    run(cmd("nbdcopy", [&src_s, &uri]));
    run(cmd("nbdcopy", [&uri, &back_s]));
    assert!(
        std::fs::read(&back).unwrap() == data,
        "the copy out differs from what went in"
    );
    let compare = || {
        cmd(
            "qemu-img",
            ["compare", "-f", "raw", "-F", "raw", &src_s, &uri],
        )
    };
    let out = run(compare());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("identical"),
        "{out:?}"
    );
    // And a difference is seen as one.
    data[12345] ^= 0xff;
    std::fs::write(&src, &data).unwrap();
    let diff = output_with_timeout(compare(), Duration::from_secs(60));
    assert_eq!(
        diff.status.code(),
        Some(1),
        "qemu-img compare missed a difference"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
