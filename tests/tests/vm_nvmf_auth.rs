//! NVMe in-band authentication (DH-HMAC-CHAP) with the Linux kernel's
//! NVMe/TCP initiator in a micro-VM (`scripts/vm`, docs/vm.md), in one
//! boot: a host with a wrong secret is refused and nothing of it reaches
//! the device; the same host with its secret connects and its data goes
//! through; a second host authenticates both ways (`--dhchap-ctrl-secret`)
//! and is refused when it holds another controller secret than the
//! target's. The kernel offers the NULL group and ffdhe2048; the target
//! takes ffdhe2048 (the NULL group is the unit tests').
//!
//! The secrets come from `nvme gen-dhchap-key` on this machine, never
//! from the engine's code. One VM, bounded by its timeout.

use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

use io_engine_tests::daemon::Daemon;
use io_engine_tests::nvmf::nqn_of;
use io_engine_tests::u;
use io_engine_tests::vm::{GUEST_HOST, Vm};
use serde_json::Value;

const VM_TIMEOUT: Duration = Duration::from_secs(240);
const HOST_A: &str = "nqn.2024-12.io.io-engine.test:host-a";
const HOST_B: &str = "nqn.2024-12.io.io-engine.test:host-b";

/// A fresh secret: `nvme gen-dhchap-key` with the SHA-256 transform.
fn gen_key() -> String {
    let out = Command::new("nvme")
        .args(["gen-dhchap-key", "--hmac=1"])
        .output()
        .expect("nvme-cli runs");
    assert!(out.status.success(), "nvme gen-dhchap-key failed");
    let key = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(key.starts_with("DHHC-1:01:"), "{key}");
    key
}

#[test]
fn the_kernel_initiator_authenticates_with_its_secret_and_is_refused_without() {
    let (key_a, key_b, key_ctrl) = (gen_key(), gen_key(), gen_key());
    let (wrong, wrong_ctrl) = (gen_key(), gen_key());
    let share = format!(
        "m0:nvmf:host={HOST_A}:dhchap={key_a}:host={HOST_B}:dhchap={key_b}:dhchap-ctrl={key_ctrl}"
    );
    let d = Daemon::start_quiet([
        "--bdev",
        "malloc:///m0?size_mb=64&blk_size=4096",
        "--share",
        &share,
    ]);
    let port = d.nvmf_addr().port();
    let nqn = nqn_of("m0");
    let sync = TcpListener::bind("127.0.0.1:0").expect("a listener");
    let sync_port = sync.local_addr().unwrap().port();
    let connect =
        format!("nvme connect -t tcp -a {GUEST_HOST} -s {port} -n {nqn} --ctrl-loss-tmo=1");
    let script = format!(
        "{connect} --hostnqn={HOST_A} --dhchap-secret={wrong}; echo wrong-rc=$?
[ -e /dev/nvme0n1 ] && echo wrong-has-device
echo refused | socat -t 30 - TCP:{GUEST_HOST}:{sync_port}
{connect} --hostnqn={HOST_A} --dhchap-secret={key_a} --nr-io-queues=2; echo right-rc=$?
for i in $(seq 50); do [ -b /dev/nvme0n1 ] && break; sleep 0.1; done
echo queues-a=$(cat /sys/class/nvme/nvme0/queue_count)
dd if=/dev/urandom of=/tmp/a bs=4k count=64 status=none
dd if=/tmp/a of=/dev/nvme0n1 bs=4k oflag=direct status=none
dd if=/dev/nvme0n1 of=/tmp/a2 bs=4k count=64 iflag=direct status=none
cmp /tmp/a /tmp/a2 && echo data-a-checked
nvme disconnect -n {nqn}
for i in $(seq 50); do [ -b /dev/nvme0n1 ] || break; sleep 0.1; done
{connect} --hostnqn={HOST_B} --dhchap-secret={key_b} --dhchap-ctrl-secret={key_ctrl} --nr-io-queues=1; echo bidir-rc=$?
for i in $(seq 50); do [ -b /dev/nvme0n1 ] && break; sleep 0.1; done
dd if=/dev/nvme0n1 of=/tmp/b bs=4k count=64 iflag=direct status=none
cmp /tmp/a /tmp/b && echo data-b-checked
nvme disconnect -n {nqn}
for i in $(seq 50); do [ -b /dev/nvme0n1 ] || break; sleep 0.1; done
{connect} --hostnqn={HOST_B} --dhchap-secret={key_b} --dhchap-ctrl-secret={wrong_ctrl}; echo badctrl-rc=$?
[ -e /dev/nvme0n1 ] && echo badctrl-has-device
echo DMESG; dmesg | grep -i nvme; echo DMESG-END
true"
    );
    // Once the guest says the wrong secret was refused: the device's
    // counters then (nothing may have reached it).
    let snapshot = {
        let grpc = d.grpc_endpoint();
        std::thread::spawn(move || {
            sync.set_nonblocking(true).expect("non-blocking");
            let deadline = Instant::now() + Duration::from_secs(180);
            while Instant::now() < deadline {
                let Ok((mut conn, _)) = sync.accept() else {
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                };
                let ctl = io_engine_tests::daemon::ctl_bin();
                let out = Command::new(&ctl)
                    .args(["--endpoint", &grpc, "stats", "io", "m0", "--output", "json"])
                    .output()
                    .expect("io-engine-ctl runs");
                let _ = std::io::Write::write_all(&mut conn, b"ok\n");
                return serde_json::from_slice::<Value>(&out.stdout).unwrap_or(Value::Null);
            }
            Value::Null
        })
    };
    let out = Vm::new()
        .forward(port)
        .forward(sync_port)
        .timeout(VM_TIMEOUT)
        .run(&script);
    let refused = snapshot.join().unwrap();
    assert!(out.success(), "the guest failed: {out}");
    let log = d.stderr();

    // The wrong secret: refused, no device, nothing read or written.
    assert!(!out.console.contains("wrong-rc=0"), "{out}");
    assert!(!out.console.contains("wrong-has-device"), "{out}");
    let s = &refused["stats"][0];
    assert!(s.is_object(), "no stats at the refusal: {refused}");
    for op in ["read", "write"] {
        assert_eq!(u(&s[op]["ops"]), 0, "{op} reached the device: {refused}");
    }
    assert!(
        log.contains("authentication failed") && log.contains(HOST_A),
        "the daemon logs the refused host: {log}"
    );

    // The right secret: admin and both I/O queues authenticated, data
    // written and read back.
    assert!(out.console.contains("right-rc=0"), "{out}");
    assert!(out.console.contains("queues-a=3"), "{out}");
    assert!(out.console.contains("data-a-checked"), "{out}");
    let dmesg = out.between("DMESG", "DMESG-END");
    assert!(
        dmesg.contains("authenticated with hash hmac(sha256) dhgroup ffdhe2048"),
        "the kernel names what it negotiated: {dmesg}"
    );

    // Both ways: the host checked the controller's response.
    assert!(out.console.contains("bidir-rc=0"), "{out}");
    assert!(out.console.contains("data-b-checked"), "{out}");
    assert!(dmesg.contains("controller authenticated"), "{dmesg}");
    // Another controller secret: the host refuses the controller.
    assert!(!out.console.contains("badctrl-rc=0"), "{out}");
    assert!(!out.console.contains("badctrl-has-device"), "{out}");

    // Every queue of the two good connections authenticated: 3 + 2.
    let authenticated = log.matches("NVMe/TCP host authenticated").count();
    assert!(
        authenticated >= 5,
        "{authenticated} queues authenticated: {log}"
    );
    // No secret in the log.
    for k in [&key_a, &key_b, &key_ctrl, &wrong, &wrong_ctrl] {
        let b64 = k.split(':').nth(2).unwrap();
        assert!(!log.contains(b64), "a secret in the daemon's log");
    }
}
