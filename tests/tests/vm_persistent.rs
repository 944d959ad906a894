//! End-to-end test of a `uring://` device on a file with the Linux
//! kernel's NVMe/TCP initiator, in a micro-VM (`scripts/vm`): the guest
//! connects, fio writes 16 MiB and verifies it through `/dev/nvme0n1`,
//! `dd` writes a known pattern at a known offset and reads it back, the
//! guest's flushes reach the device, and after the guest has disconnected
//! the host finds in the backing file exactly what the guest wrote, where
//! it wrote it.
//!
//! The daemon (adaptive polling on one core) is killed by its [`Daemon`]
//! guard when the test ends; the VM is bounded by its timeout; the backing
//! file lives in a scratch directory on the work disk, removed at the end.
//! QEMU emulates the guest: a functional test, never a benchmark.

use std::time::Duration;

use io_engine_tests::backing::{Scratch, read_at};
use io_engine_tests::daemon::Daemon;
use io_engine_tests::nvmf::nqn_of;
use io_engine_tests::u;
use io_engine_tests::vm::{GUEST_HOST, Vm};
use serde_json::Value;

/// Bound on the run: boot, connect, 16 MiB written and verified, the
/// pattern, disconnect.
const VM_TIMEOUT: Duration = Duration::from_secs(240);

/// Where the guest writes its pattern: 64 KiB at 20 MiB.
const PATTERN_OFFSET: u64 = 20 << 20;
const PATTERN_LEN: usize = 64 << 10;

/// What `yes io-engine-persistent | head -c 65536` prints.
fn pattern() -> Vec<u8> {
    b"io-engine-persistent\n"
        .iter()
        .copied()
        .cycle()
        .take(PATTERN_LEN)
        .collect()
}

#[test]
fn the_kernel_initiator_writes_through_a_uring_device_into_its_file() {
    let dir = Scratch::new("vm-persistent");
    let file = dir.file("vm0.img", 32);
    let d = Daemon::start_quiet([
        "--bdev",
        &format!("uring://{}?blk_size=4096", file.display()),
        "--share",
        "vm0.img:nvmf",
    ]);
    let port = d.nvmf_addr().port();
    let nqn = nqn_of("vm0.img");
    let seek = PATTERN_OFFSET / PATTERN_LEN as u64;
    // fio: two jobs of 4 KiB random writes over their own 8 MiB, each
    // read back and checked (crc32c), then an fsync; then the pattern
    // with dd (O_DIRECT, fsync), read back; then the disconnect.
    let script = format!(
        "set -e
nvme connect -t tcp -a {GUEST_HOST} -s {port} -n {nqn} --nr-io-queues=2 --ctrl-loss-tmo=5
for i in $(seq 50); do [ -b /dev/nvme0n1 ] && break; sleep 0.1; done
status=0
fio --ioengine=libaio --direct=1 --filename=/dev/nvme0n1 --iodepth=8 \
  --verify=crc32c --verify_fatal=1 --verify_state_save=0 \
  --eta=never --output-format=json --output=/tmp/fio.json \
  --name=verify --rw=randwrite --bs=4k --numjobs=2 --offset_increment=8M --size=8M \
  --end_fsync=1 || status=$?
echo FIO-JSON; cat /tmp/fio.json; echo FIO-END
yes io-engine-persistent | head -c {PATTERN_LEN} > /tmp/pattern
dd if=/tmp/pattern of=/dev/nvme0n1 bs={PATTERN_LEN} seek={seek} oflag=direct conv=fsync status=none
dd if=/dev/nvme0n1 of=/tmp/back bs={PATTERN_LEN} skip={seek} count=1 iflag=direct status=none
cmp /tmp/pattern /tmp/back && echo pattern-read-back
nvme disconnect -n {nqn}
exit $status"
    );
    let out = Vm::new().forward(port).timeout(VM_TIMEOUT).run(&script);
    assert!(out.success(), "the guest failed: {out}");
    assert!(out.console.contains("pattern-read-back"), "{out}");

    let fio = out.between("FIO-JSON", "FIO-END");
    let fio = &fio[fio.find('{').unwrap_or(0)..];
    let report: Value =
        serde_json::from_str(fio).unwrap_or_else(|e| panic!("fio printed no JSON ({e}): {out}"));
    let jobs = report["jobs"].as_array().expect("fio's jobs");
    assert_eq!(jobs.len(), 2, "{report}");
    for job in jobs {
        assert_eq!(u(&job["error"]), 0, "{job}");
        let (w, r) = (u(&job["write"]["io_bytes"]), u(&job["read"]["io_bytes"]));
        assert!(w == 8 << 20 && r >= w, "the verify did not run: {job}");
    }

    // The guest's flushes reached the device, and nothing failed.
    let stats = d.ctl_json(&["stats", "io", "vm0.img"]);
    let s = &stats["stats"][0];
    assert!(
        u(&s["flush"]["ops"]) > 0,
        "no flush reached the device: {stats}"
    );
    assert_eq!(u(&s["write"]["errors"]), 0, "{stats}");
    assert!(
        u(&s["write"]["bytes"]) >= (16 << 20) + PATTERN_LEN as u64,
        "{stats}"
    );
    let exports = d.ctl_json(&["export", "list"]);
    assert_eq!(
        u(&exports["exports"][0]["connections"]),
        0,
        "the guest disconnected: {exports}"
    );

    // The file holds what the guest wrote: the pattern where dd put it,
    // and fio's verify headers, each naming its own offset, over 16 MiB.
    assert!(
        read_at(&file, PATTERN_OFFSET, PATTERN_LEN) == pattern(),
        "the pattern is not at {PATTERN_OFFSET} in {}",
        file.display()
    );
    let data = read_at(&file, 0, 16 << 20);
    for (i, block) in data.chunks_exact(4096).enumerate() {
        let at = i as u64 * 4096;
        assert_eq!(block[..2], [0xca, 0xac], "no fio header at {at}");
        let offset = u64::from_le_bytes(block[16..24].try_into().unwrap());
        assert_eq!(offset, at, "the block at {at} says {offset}");
    }
}
