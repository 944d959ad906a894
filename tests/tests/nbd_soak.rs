//! NBD soak: four fio clients run 60 s of mixed IO with verification while
//! other connections are opened and dropped at random, mid-request. Zero
//! data errors, nothing leaked (IO objects, IOs in flight, connections), and
//! the daemon's RSS stays flat.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use io_engine::env::xorshift::XorShift;
use io_engine_api::v1 as pb;
use io_engine_tests::daemon::Daemon;

const SOAK: Duration = Duration::from_secs(60);

/// Opens a connection, negotiates export `name`, sends a few reads and
/// vanishes without reading the replies.
fn hit_and_run(addr: SocketAddr, name: &str, reads: u64, seed: u64) -> std::io::Result<()> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut greeting = [0u8; 18];
    s.read_exact(&mut greeting)?;
    assert_eq!(&greeting[..8], b"NBDMAGIC");
    // Client flags: FIXED_NEWSTYLE | NO_ZEROES; then GO for `name`.
    let mut out = Vec::new();
    out.extend_from_slice(&3u32.to_be_bytes());
    out.extend_from_slice(b"IHAVEOPT");
    out.extend_from_slice(&7u32.to_be_bytes());
    out.extend_from_slice(&(4 + name.len() as u32 + 2).to_be_bytes());
    out.extend_from_slice(&(name.len() as u32).to_be_bytes());
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(&0u16.to_be_bytes());
    s.write_all(&out)?;
    // Option replies until ACK (type 1).
    loop {
        let mut h = [0u8; 20];
        s.read_exact(&mut h)?;
        let kind = u32::from_be_bytes(h[12..16].try_into().unwrap());
        let len = u32::from_be_bytes(h[16..20].try_into().unwrap());
        let mut data = vec![0u8; len as usize];
        s.read_exact(&mut data)?;
        if kind == 1 {
            break;
        }
        assert!(kind < 0x8000_0000, "GO refused: reply type {kind:#x}");
    }
    let mut req = Vec::new();
    for i in 0..reads {
        req.extend_from_slice(&0x2560_9513u32.to_be_bytes());
        req.extend_from_slice(&0u16.to_be_bytes()); // flags
        req.extend_from_slice(&0u16.to_be_bytes()); // READ
        req.extend_from_slice(&i.to_be_bytes()); // cookie
        let block = (seed.wrapping_mul(0x9e37_79b9) + i * 7919) % 65536;
        req.extend_from_slice(&(block * 4096).to_be_bytes());
        req.extend_from_slice(&4096u32.to_be_bytes());
    }
    s.write_all(&req)?;
    // Gone: the replies are never read.
    drop(s);
    Ok(())
}

#[test]
fn four_verifying_clients_and_random_drops_for_a_minute() {
    let mut daemon = Daemon::start_quiet([
        "--bdev",
        "malloc:///soak?size_mb=256&blk_size=4096",
        "--share",
        "soak",
    ]);
    let addr = daemon.nbd_addr();
    let uri = daemon.nbd_uri("soak");

    // Four verifying clients, each on a region of its own.
    let fio = Command::new("fio")
        .args([
            "--name=soak",
            "--ioengine=nbd",
            &format!("--uri={uri}"),
            "--rw=randrw",
            "--rwmixread=30",
            "--bs=4k",
            "--iodepth=16",
            "--numjobs=4",
            "--size=32m",
            "--offset_increment=32m",
            "--verify=crc32c",
            "--verify_state_save=0",
            "--verify_backlog=256",
            "--verify_fatal=1",
            "--time_based",
            &format!("--runtime={}", SOAK.as_secs()),
            "--output-format=json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start fio");

    // Meanwhile: connections that come, send reads and vanish.
    let stop = Arc::new(AtomicBool::new(false));
    let dropped = Arc::new(AtomicU64::new(0));
    let churn = {
        let (stop, dropped) = (stop.clone(), dropped.clone());
        std::thread::spawn(move || {
            let mut rng = XorShift::new(0x1234_5678);
            while !stop.load(Ordering::Relaxed) {
                let seed = rng.next_u64();
                hit_and_run(addr, "soak", 1 + seed % 32, seed).expect("a dropping client");
                dropped.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(10 + seed % 90));
            }
        })
    };

    std::thread::sleep(Duration::from_secs(5));
    let rss_early = daemon.rss_kib();
    let t0 = Instant::now();
    let out = fio.wait_with_output().expect("fio finished");
    let rss_late = daemon.rss_kib();
    stop.store(true, Ordering::Relaxed);
    churn.join().unwrap();
    assert!(t0.elapsed() > SOAK / 2);

    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "fio failed: {stderr}");
    // fio's nbd engine prints "connected" lines before the JSON.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = &stdout[stdout.find('{').expect("fio JSON")..];
    let report: serde_json::Value = serde_json::from_str(json).expect("fio JSON");
    let jobs = report["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 4);
    for j in jobs {
        assert_eq!(j["error"], 0, "job {} failed", j["jobname"]);
        assert!(j["write"]["io_bytes"].as_u64().unwrap() > 0);
        assert!(j["read"]["io_bytes"].as_u64().unwrap() > 0);
    }
    assert!(
        dropped.load(Ordering::Relaxed) > 100,
        "too few dropping clients"
    );
    // RSS flat: no more than 32 MiB of growth over the minute.
    assert!(
        rss_late < rss_early + 32 * 1024,
        "RSS grew from {rss_early} KiB to {rss_late} KiB"
    );

    // Nothing leaked once every connection is gone.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let ch = daemon.channel().await;
        let mut stats = pb::stats_service_client::StatsServiceClient::new(ch.clone());
        let mut exports = pb::export_service_client::ExportServiceClient::new(ch);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let io = stats
                .get_io_stats(pb::GetIoStatsRequest {
                    name: Some("soak".into()),
                })
                .await
                .unwrap()
                .into_inner();
            let pools = stats
                .get_pool_stats(pb::GetPoolStatsRequest {})
                .await
                .unwrap()
                .into_inner();
            let list = exports
                .list(pb::ListExportsRequest {})
                .await
                .unwrap()
                .into_inner();
            let in_flight = io.stats[0].in_flight;
            let in_use = pools
                .pools
                .iter()
                .find(|p| p.name == "bdev_io")
                .unwrap()
                .in_use;
            let conns = list.exports[0].connections;
            if in_flight == 0 && in_use == 0 && conns == 0 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "leak: {in_flight} IOs in flight, {in_use} IO objects in use, {conns} connections"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let (status, took) = daemon.terminate();
    assert!(status.success(), "daemon exit {status:?}");
    assert!(took < Duration::from_secs(5));
}
