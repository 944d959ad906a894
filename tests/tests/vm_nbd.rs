//! End-to-end tests with the real Linux initiators, in a micro-VM
//! (`scripts/vm`, docs/vm.md): the kernel's NBD client attaching the
//! daemon's export as `/dev/nbd0` (as a Kubernetes node attaches NBD) and
//! fio verifying data through it; the guest's network reaching nothing but
//! the forwarded ports; and the NVMe/TCP initiator present for the NVMe-oF
//! tests.
//!
//! Every test starts its own daemon (adaptive polling on one core) and
//! [`Daemon`] kills it when the test ends; the VM is bounded by its timeout
//! and runs one at a time (the harness's lock): QEMU emulates the guest, so
//! these are functional tests, never benchmarks.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use io_engine_tests::daemon::Daemon;
use io_engine_tests::u;
use io_engine_tests::vm::{GUEST_HOST, Vm};
use serde_json::Value;

/// Bound on the NBD run: boot, attach, 16 MiB written and read back, detach.
const NBD_VM_TIMEOUT: Duration = Duration::from_secs(180);

/// Bound on the short runs that only look around the guest.
const SMALL_VM_TIMEOUT: Duration = Duration::from_secs(90);

#[test]
fn the_kernel_nbd_client_writes_and_verifies_through_the_export() {
    let d = Daemon::start_quiet(["--bdev", "malloc:///m0?size_mb=64", "--share", "m0"]);
    let port = d.nbd_addr().port();
    // Two fio jobs one after the other on /dev/nbd0 through libaio with
    // O_DIRECT: 4 KiB random writes over the first 4 MiB, then 4-128 KiB
    // ones over the next 12 MiB; each job reads back and checks (crc32c)
    // every block it wrote before it ends.
    let script = format!(
        "set -e
nbd-client -N m0 {GUEST_HOST} {port} /dev/nbd0
echo size=$(cat /sys/block/nbd0/size)
status=0
fio --ioengine=libaio --direct=1 --filename=/dev/nbd0 --rw=randwrite --iodepth=8 \
  --verify=crc32c --verify_fatal=1 --verify_state_save=0 \
  --eta=never --output-format=json --output=/tmp/fio.json \
  --name=small --bs=4k --offset=0 --size=4M \
  --name=mixed --stonewall --bsrange=4k-128k --offset=4M --size=12M || status=$?
echo FIO-JSON; cat /tmp/fio.json; echo FIO-END
nbd-client -d /dev/nbd0
exit $status"
    );
    let out = Vm::new().forward(port).timeout(NBD_VM_TIMEOUT).run(&script);
    assert!(
        out.success(),
        "fio or nbd-client failed in the guest: {out}"
    );
    // 64 MiB in 512-byte sectors, as the export announced it.
    assert!(out.console.contains("size=131072"), "{out}");
    let report: Value = serde_json::from_str(&out.between("FIO-JSON", "FIO-END"))
        .unwrap_or_else(|e| panic!("fio printed no JSON ({e}): {out}"));
    let jobs = report["jobs"].as_array().expect("fio's jobs");
    assert_eq!(jobs.len(), 2, "{report}");
    let (mut written, mut read) = (0, 0);
    for job in jobs {
        assert_eq!(u(&job["error"]), 0, "{job}");
        let w = u(&job["write"]["io_bytes"]);
        let r = u(&job["read"]["io_bytes"]);
        // The verify phase read back every byte the job wrote.
        assert!(w > 0 && r >= w, "the verify did not run: {job}");
        written += w;
        read += r;
    }
    assert_eq!(written, 16 << 20, "{report}");

    // Every byte crossed the export into the device and back.
    let stats = d.ctl_json(&["stats", "io", "m0"]);
    let s = &stats["stats"][0];
    assert_eq!(u(&s["write"]["errors"]), 0, "{stats}");
    assert_eq!(u(&s["read"]["errors"]), 0, "{stats}");
    assert!(u(&s["write"]["bytes"]) >= written, "{stats}");
    assert!(u(&s["read"]["bytes"]) >= read, "{stats}");
    assert_eq!(u(&s["in_flight"]), 0, "{stats}");
}

#[test]
fn the_guest_reaches_only_forwarded_ports() {
    // A forwarded listener answers each connection with its number; the
    // other one, not forwarded, must never see a connection.
    let forwarded = listener();
    let hidden = listener();
    let fport = forwarded.local_addr().unwrap().port();
    let hport = hidden.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for (n, conn) in forwarded.incoming().enumerate() {
            let Ok(mut conn) = conn else { break };
            count.fetch_add(1, Ordering::SeqCst);
            let _ = conn.write_all(format!("connection {}\n", n + 1).as_bytes());
        }
    });
    // bash's /dev/tcp connects; each attempt is bounded. Every other way
    // out is tried: the gateway (this machine), the guest-side address of
    // the hidden port, and an outside address.
    let script = format!(
        "try() {{ timeout 10 bash -c \"exec 3<>/dev/tcp/$1/$2 && head -n 1 <&3\"; }}
try {GUEST_HOST} {fport} && try {GUEST_HOST} {fport} || exit 1
for target in '10.0.2.2 {hport}' '{GUEST_HOST} {hport}' '10.0.2.2 22' '1.1.1.1 80'; do
  if try $target; then echo \"REACHED $target\"; exit 2; fi
done
echo ALL-REFUSED"
    );
    let out = Vm::new()
        .forward(fport)
        .timeout(SMALL_VM_TIMEOUT)
        .run(&script);
    assert!(out.success(), "{out}");
    // Each guest connection was a host connection of its own.
    assert!(out.console.contains("connection 1"), "{out}");
    assert!(out.console.contains("connection 2"), "{out}");
    assert!(out.console.contains("ALL-REFUSED"), "{out}");
    assert_eq!(accepted.load(Ordering::SeqCst), 2, "{out}");
    hidden.set_nonblocking(true).unwrap();
    match hidden.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        Ok((mut conn, peer)) => {
            let mut buf = Vec::new();
            let _ = conn.read_to_end(&mut buf);
            panic!("the unforwarded port saw a connection from {peer}: {out}");
        }
        Err(e) => panic!("accept on the unforwarded port: {e}"),
    }
}

#[test]
fn the_guest_has_the_nvme_tcp_initiator() {
    let out = Vm::new().timeout(SMALL_VM_TIMEOUT).run(
        "set -e
uname -r
test -d /sys/module/nvme_tcp && echo NVME-TCP-LOADED
test -c /dev/nvme-fabrics && echo FABRICS-DEVICE
grep -q '^nqn\\.' /etc/nvme/hostnqn && echo HOSTNQN
nvme list >/dev/null && echo NVME-LIST-RUNS
test -b /dev/nbd0 && echo NBD-DEVICE",
    );
    assert!(out.success(), "{out}");
    for line in [
        "NVME-TCP-LOADED",
        "FABRICS-DEVICE",
        "HOSTNQN",
        "NVME-LIST-RUNS",
        "NBD-DEVICE",
    ] {
        assert!(out.console.contains(line), "no {line}: {out}");
    }
}

/// A listener on a kernel-chosen port of 127.0.0.1.
fn listener() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").expect("a listener on 127.0.0.1")
}
