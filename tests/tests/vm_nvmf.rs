//! End-to-end tests with the Linux kernel's NVMe/TCP initiator, in a
//! micro-VM (`scripts/vm`, docs/vm.md), as a Kubernetes node attaches
//! storage: `nvme discover`, `nvme connect` with two I/O queues, the
//! controller and namespace as `nvme id-ctrl`/`id-ns` see them, fio
//! verifying data through `/dev/nvme0n1`, `blkdiscard`, `nvme disconnect`;
//! and an unshare while the host is connected, which the host survives
//! without hanging.
//!
//! Every test starts its own daemon (adaptive polling on one core) and
//! [`Daemon`] kills it when the test ends; the VM is bounded by its timeout
//! and runs one at a time: QEMU emulates the guest, so these are
//! functional tests, never benchmarks.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use io_engine_tests::daemon::Daemon;
use io_engine_tests::nvmf::nqn_of;
use io_engine_tests::u;
use io_engine_tests::vm::{GUEST_HOST, Vm};
use serde_json::Value;

/// Bound on the main run: boot, connect, 24 MiB written and read back,
/// discard, disconnect.
const VM_TIMEOUT: Duration = Duration::from_secs(240);

fn start() -> Daemon {
    Daemon::start_quiet([
        "--bdev",
        "malloc:///m0?size_mb=64&blk_size=4096",
        "--share",
        "m0:nvmf",
    ])
}

#[test]
fn the_kernel_initiator_connects_verifies_discards_and_disconnects() {
    let d = start();
    let port = d.nvmf_addr().port();
    let nqn = nqn_of("m0");
    // fio: 4 KiB random writes by two jobs over their own 4 MiB, then
    // 4-128 KiB ones over 8 MiB each; each job reads back and checks
    // (crc32c) every block it wrote. Then random reads, a discard of the
    // first MiB (read back as zeroes), and the disconnect.
    let script = format!(
        "set -e
nvme discover -t tcp -a {GUEST_HOST} -s {port} | grep -c 'subnqn:  {nqn}' | sed 's/^/discovered=/'
nvme connect -t tcp -a {GUEST_HOST} -s {port} -n {nqn} --nr-io-queues=2 --ctrl-loss-tmo=5
for i in $(seq 50); do [ -b /dev/nvme0n1 ] && break; sleep 0.1; done
echo queues=$(cat /sys/class/nvme/nvme0/queue_count)
echo sysfs-cntlid=$(cat /sys/class/nvme/nvme0/cntlid)
echo ID-CTRL; nvme id-ctrl /dev/nvme0 -o json; echo ID-END
echo ID-NS; nvme id-ns /dev/nvme0n1 -o json; echo NS-END
status=0
fio --ioengine=libaio --direct=1 --filename=/dev/nvme0n1 --iodepth=8 \
  --verify=crc32c --verify_fatal=1 --verify_state_save=0 \
  --eta=never --output-format=json --output=/tmp/fio.json \
  --name=small --rw=randwrite --bs=4k --numjobs=2 --offset=0 --offset_increment=4M --size=4M \
  --name=mixed --stonewall --rw=randwrite --bsrange=4k-128k --numjobs=2 --offset=8M --offset_increment=8M --size=8M \
  --name=reads --stonewall --rw=randread --bs=4k --numjobs=2 --size=8M --verify=0 || status=$?
echo FIO-JSON; cat /tmp/fio.json; echo FIO-END
# nvme copy: blocks 4096-4103 and 5000-5001 (NLB is 0-based) to 6000.
dd if=/dev/urandom of=/tmp/a bs=4k count=8 status=none
dd if=/dev/urandom of=/tmp/b bs=4k count=2 status=none
dd if=/tmp/a of=/dev/nvme0n1 bs=4k seek=4096 oflag=direct status=none
dd if=/tmp/b of=/dev/nvme0n1 bs=4k seek=5000 oflag=direct status=none
nvme copy /dev/nvme0n1 --sdlba=6000 --slbs=4096,5000 --blocks=7,1
cat /tmp/a /tmp/b > /tmp/ab
dd if=/dev/nvme0n1 of=/tmp/copied bs=4k skip=6000 count=10 iflag=direct status=none
cmp /tmp/ab /tmp/copied && echo copy-checked
blkdiscard -o 0 -l 1048576 /dev/nvme0n1
cmp -n 1048576 /dev/nvme0n1 /dev/zero && echo discarded-reads-zero
nvme disconnect -n {nqn}
exit $status"
    );
    let out = Vm::new().forward(port).timeout(VM_TIMEOUT).run(&script);
    assert!(out.success(), "the guest failed: {out}");
    assert!(out.console.contains("discovered=1"), "{out}");
    assert!(
        out.console.contains("queues=3"),
        "admin and two I/O queues: {out}"
    );
    let ctrl: Value = serde_json::from_str(&out.between("ID-CTRL", "ID-END"))
        .unwrap_or_else(|e| panic!("no id-ctrl JSON ({e}): {out}"));
    let cntlid = u(&ctrl["cntlid"]);
    assert!(
        out.console.contains(&format!("sysfs-cntlid={cntlid}")),
        "Identify's CNTLID is Connect's: {out}"
    );
    assert_eq!(u(&ctrl["mdts"]), 5, "{ctrl}");
    assert_eq!(ctrl["subnqn"], nqn.as_str(), "{ctrl}");
    assert_eq!(u(&ctrl["oncs"]) & 0x10C, 0x10C, "Write Zeroes, DSM and Copy: {ctrl}");
    let ns: Value = serde_json::from_str(&out.between("ID-NS", "NS-END"))
        .unwrap_or_else(|e| panic!("no id-ns JSON ({e}): {out}"));
    assert_eq!(u(&ns["nsze"]), 16384, "{ns}");
    assert_eq!((u(&ns["mssrl"]), u(&ns["mcl"]), u(&ns["msrc"])), (256, 4096, 127), "{ns}");
    let uuid = d.ctl_json(&["bdev", "list"])["bdevs"][0]["uuid"]
        .as_str()
        .expect("the device's UUID")
        .replace('-', "");
    assert_eq!(
        ns["nguid"].as_str(),
        Some(uuid.as_str()),
        "NGUID is the device's UUID: {ns}"
    );

    let fio = out.between("FIO-JSON", "FIO-END");
    // fio may print notes before its JSON.
    let fio = &fio[fio.find('{').unwrap_or(0)..];
    let report: Value =
        serde_json::from_str(fio).unwrap_or_else(|e| panic!("fio printed no JSON ({e}): {out}"));
    let jobs = report["jobs"].as_array().expect("fio's jobs");
    assert_eq!(jobs.len(), 6, "{report}");
    let mut written = 0;
    for job in jobs {
        assert_eq!(u(&job["error"]), 0, "{job}");
        let (w, r) = (u(&job["write"]["io_bytes"]), u(&job["read"]["io_bytes"]));
        if job["jobname"] != "reads" {
            assert!(w > 0 && r >= w, "the verify did not run: {job}");
        } else {
            assert!(r > 0, "{job}");
        }
        written += w;
    }
    assert_eq!(written, 24 << 20, "{report}");
    assert!(out.console.contains("discarded-reads-zero"), "{out}");
    assert!(out.console.contains("copy-checked"), "nvme copy moved the data: {out}");

    let stats = d.ctl_json(&["stats", "io", "m0"]);
    let s = &stats["stats"][0];
    assert_eq!(u(&s["copy"]["bytes"]), 10 * 4096, "{stats}");
    assert_eq!(u(&s["write"]["errors"]), 0, "{stats}");
    assert!(u(&s["write"]["bytes"]) >= written, "{stats}");
    assert_eq!(u(&s["in_flight"]), 0, "{stats}");
}

#[test]
fn an_unshare_while_connected_leaves_the_host_without_a_hang() {
    let d = start();
    let port = d.nvmf_addr().port();
    let nqn = nqn_of("m0");
    let ready = TcpListener::bind("127.0.0.1:0").expect("a listener");
    let ready_port = ready.local_addr().unwrap().port();
    // The guest connects, then waits (bounded) for its namespace to go;
    // a read of the device after that fails at once rather than hanging.
    let script = format!(
        "nvme connect -t tcp -a {GUEST_HOST} -s {port} -n {nqn} --nr-io-queues=2 --ctrl-loss-tmo=2 --reconnect-delay=1 || exit 3
for i in $(seq 50); do [ -b /dev/nvme0n1 ] && break; sleep 0.1; done
dd if=/dev/nvme0n1 of=/dev/null bs=4k count=1 iflag=direct || exit 4
echo connected | socat - TCP:{GUEST_HOST}:{ready_port} || exit 7
for i in $(seq 600); do [ -b /dev/nvme0n1 ] || break; sleep 0.1; done
[ -b /dev/nvme0n1 ] && {{ echo still-there; exit 5; }}
echo namespace-gone
timeout 10 dd if=/dev/nvme0n1 of=/dev/null bs=4k count=1 iflag=direct 2>/dev/null && exit 6
echo no-hang"
    );
    let unsharer = {
        let grpc = d.grpc_endpoint();
        std::thread::spawn(move || {
            // Unshare once the guest says it is connected and has read
            // (bounded: the listener's accept is polled).
            ready
                .set_nonblocking(true)
                .expect("a non-blocking listener");
            let deadline = Instant::now() + Duration::from_secs(180);
            while Instant::now() < deadline {
                if ready.accept().is_err() {
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
                let ctl = io_engine_tests::daemon::ctl_bin();
                let list = std::process::Command::new(&ctl)
                    .args(["--endpoint", &grpc, "export", "list", "--output", "json"])
                    .output()
                    .expect("io-engine-ctl runs");
                let list: Value = serde_json::from_slice(&list.stdout).unwrap_or(Value::Null);
                let conns = list["exports"][0]["connections"].as_u64().unwrap_or(0);
                let st = std::process::Command::new(&ctl)
                    .args(["--endpoint", &grpc, "bdev", "unshare", "m0"])
                    .status()
                    .expect("io-engine-ctl runs");
                return (conns, st.success());
            }
            (0, false)
        })
    };
    let out = Vm::new()
        .forward(port)
        .forward(ready_port)
        .timeout(VM_TIMEOUT)
        .run(&script);
    let (conns, unshared) = unsharer.join().unwrap();
    assert_eq!(conns, 2, "the host's two I/O queues were attached: {out}");
    assert!(
        unshared,
        "the unshare ran while the host was connected: {out}"
    );
    assert!(out.success(), "the guest failed: {out}");
    assert!(out.console.contains("namespace-gone"), "{out}");
    assert!(out.console.contains("no-hang"), "{out}");
    assert!(
        d.ctl_json(&["export", "list"])["exports"]
            .as_array()
            .is_none_or(|e| e.is_empty())
    );
}
