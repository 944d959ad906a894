//! Bounded errors and control-plane limits (issue 17, points 6 and 7),
//! against the real daemon with tonic clients at their default limits (and
//! Python's grpcio, plaintext and over mTLS, for the huge input):
//! errors that quote huge client input keep their code and stay under
//! 1 KiB; names with control characters are refused; reflection answers
//! `v1alpha` too; an oversized request is refused before it is decoded; a
//! flood of requests beyond `--grpc-max-concurrent-requests` is refused at
//! once while health, `/metrics` and the NBD data path keep answering, a
//! perf run outlives `--grpc-request-timeout`, and nothing is left behind.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::time::{Duration, Instant};

use io_engine_api::v1 as pb;
use io_engine_tests::certs::TestPki;
use io_engine_tests::daemon::Daemon;
use io_engine_tests::grpcio::{PythonGrpc, scripts_dir};
use io_engine_tests::http;
use io_engine_tests::tools::TempDir;
use pb::bdev_service_client::BdevServiceClient;
use pb::engine_service_client::EngineServiceClient;
use pb::export_service_client::ExportServiceClient;
use pb::perf_service_client::PerfServiceClient;
use tonic::{Code, Status};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// The daemon's cap on a status message, in bytes.
const MAX_MESSAGE: usize = 1024;

/// The error of `r`, which must have `code` and a message under 1 KiB.
fn refused<T: Debug>(what: &str, r: Result<tonic::Response<T>, Status>, code: Code) -> String {
    let s = r.expect_err(what);
    assert_eq!(s.code(), code, "{what}: {s:?}");
    let m = s.message().to_owned();
    assert!(
        m.len() < MAX_MESSAGE,
        "{what}: a {}-byte message: {m:.200}",
        m.len()
    );
    m
}

fn create(uri: impl Into<String>) -> pb::CreateBdevRequest {
    pb::CreateBdevRequest { uri: uri.into() }
}

fn share(bdev: &str, protocol: &str) -> pb::ShareRequest {
    pb::ShareRequest {
        bdev: bdev.into(),
        protocol: protocol.into(),
        ..Default::default()
    }
}

async fn device_names(bdevs: &mut BdevServiceClient<tonic::transport::Channel>) -> Vec<String> {
    let list = bdevs.list(pb::ListBdevsRequest {}).await.expect("List");
    list.into_inner()
        .bdevs
        .into_iter()
        .map(|b| b.name)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_input_gets_its_real_error_in_a_message_under_1_kib() {
    let d = Daemon::start_quiet(["--bdev", "malloc:///m0?size_mb=1"]);
    let mut bdevs = BdevServiceClient::new(d.channel().await);
    let mut exports = ExportServiceClient::new(d.channel().await);
    let mib = "9".repeat(1 << 20);
    let name = "n".repeat(10_000);
    let cut = "... (1048576 bytes)";
    for (what, uri, says) in [
        (
            "a 1 MiB blk_size",
            format!("malloc:///m1?size_mb=1&blk_size={mib}"),
            "too large for 64 bits",
        ),
        (
            "a 1 MiB parameter name",
            format!("malloc:///m1?size_mb=1&{mib}=1"),
            "unknown parameter",
        ),
        (
            "a 1 MiB uuid",
            format!("malloc:///m1?size_mb=1&uuid={mib}"),
            "not a usable uuid",
        ),
        (
            "a 10,000-character name",
            format!("malloc:///{name}?size_mb=1"),
            "is 10000 bytes long; at most 255",
        ),
    ] {
        let m = refused(what, bdevs.create(create(uri)).await, Code::InvalidArgument);
        assert!(m.contains(says), "{what}: {m:.300}");
        let tail = if what.contains("10,000") {
            "... (10000 bytes)"
        } else {
            cut
        };
        assert!(m.contains(tail), "{what}: {m:.300}");
    }

    // Names looked up, not parsed: NOT_FOUND, just as short.
    let m = refused(
        "Get of a 10,000-character name",
        bdevs.get(pb::GetBdevRequest { name: name.clone() }).await,
        Code::NotFound,
    );
    assert!(m.ends_with("... (10000 bytes)"), "{m}");
    refused(
        "Destroy of a 10,000-character name",
        bdevs
            .destroy(pb::DestroyBdevRequest { name: name.clone() })
            .await,
        Code::NotFound,
    );
    refused(
        "Share of a 10,000-character name",
        exports.share(share(&name, "nbd")).await,
        Code::NotFound,
    );

    // Other fields that are quoted back: a protocol, an NQN, a host, a workload.
    let m = refused(
        "a 1 MiB protocol",
        exports.share(share("m0", &mib)).await,
        Code::InvalidArgument,
    );
    assert!(m.contains("unknown protocol") && m.contains(cut), "{m}");
    let mut long_nqn = share("m0", "nvmf");
    long_nqn.nqn = format!("nqn.2019-05.io.example:{mib}");
    let m = refused(
        "a 1 MiB NQN",
        exports.share(long_nqn).await,
        Code::InvalidArgument,
    );
    assert!(m.contains("longer than 223 bytes"), "{m}");
    let mut long_host = share("m0", "nvmf");
    long_host.allowed_hosts = vec![format!("nqn.2019-05.io.example:{mib}")];
    refused(
        "a 1 MiB allowed host",
        exports.share(long_host).await,
        Code::InvalidArgument,
    );
    let mut perf = PerfServiceClient::new(d.channel().await);
    let m = refused(
        "a 1 MiB workload",
        perf.run(pb::RunPerfRequest {
            bdevs: vec!["m0".into()],
            workload: mib.clone(),
            seconds: 1.0,
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
    );
    assert!(m.contains("unknown workload") && m.contains(cut), "{m}");

    // Nothing was created or shared on the way.
    assert_eq!(device_names(&mut bdevs).await, ["m0"]);
    let list = exports.list(pb::ListExportsRequest {}).await.unwrap();
    assert!(list.into_inner().exports.is_empty());
}

/// The same with the client the issue names: Python's grpcio, its default
/// limits (`tests/python/huge_input.py`), plaintext and over mTLS.
#[test]
fn a_default_limits_grpcio_client_gets_invalid_argument_under_1_kib() {
    let grpc = PythonGrpc::new();
    let script = scripts_dir().join("huge_input.py");
    let check = |d: &Daemon, tls: &[&std::path::Path]| {
        let mut args: Vec<std::ffi::OsString> = vec![
            "--endpoint".into(),
            d.grpc_addr().to_string().into(),
            "--stubs".into(),
            grpc.stubs_dir().into(),
        ];
        for (flag, path) in ["--ca", "--cert", "--key"].iter().zip(tls) {
            args.push(flag.into());
            args.push(path.into());
        }
        let out = grpc.run_file(&script, &args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}\n{stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!stdout.contains("FAIL"), "{stdout}");
        assert!(
            stdout.lines().filter(|l| l.starts_with("ok ")).count() >= 2,
            "{stdout}"
        );
    };
    let plain = Daemon::start_quiet(["--bdev", "malloc:///m0?size_mb=1"]);
    check(&plain, &[]);
    drop(plain);
    let dir = TempDir::new("grpc-limits-pki");
    let pki = TestPki::create(dir.path()).unwrap();
    let tls = Daemon::start_quiet([
        "--bdev".as_ref(),
        "malloc:///m0?size_mb=1".as_ref(),
        "--grpc-tls-cert".as_ref(),
        pki.server_cert.as_os_str(),
        "--grpc-tls-key".as_ref(),
        pki.server_key.as_os_str(),
        "--grpc-tls-client-ca".as_ref(),
        pki.ca.as_os_str(),
    ]);
    check(&tls, &[&pki.ca, &pki.client_cert, &pki.client_key]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_and_nqns_with_control_characters_are_refused() {
    let d = Daemon::start_quiet(["--bdev", "malloc:///m0?size_mb=1"]);
    let mut bdevs = BdevServiceClient::new(d.channel().await);
    for (uri, says) in [
        ("malloc:///a%01b?size_mb=1", "'\\u{1}'"),
        ("malloc:///a%0Ab?size_mb=1", "'\\n'"),
        ("malloc:///a%1Bb?size_mb=1", "'\\u{1b}'"),
        ("malloc:///a\u{7}b?size_mb=1", "'\\u{7}'"),
        ("malloc:///a%7Fb?size_mb=1", "'\\u{7f}'"),
    ] {
        let m = refused(uri, bdevs.create(create(uri)).await, Code::InvalidArgument);
        assert!(m.contains(says), "{uri}: {m}");
        // The name is quoted escaped: no raw control character goes back.
        assert!(!m.chars().any(char::is_control), "{uri}: {m:?}");
    }
    let mut exports = ExportServiceClient::new(d.channel().await);
    let mut nqn = share("m0", "nvmf");
    nqn.nqn = "nqn.2019-05.io.example:a\nb".into();
    let m = refused(
        "an NQN with a newline",
        exports.share(nqn).await,
        Code::InvalidArgument,
    );
    assert!(m.contains("control character"), "{m}");
    let mut host = share("m0", "nvmf");
    host.allowed_hosts = vec!["nqn.2019-05.io.example:h\u{1}".into()];
    let m = refused(
        "an allowed host with a control character",
        exports.share(host).await,
        Code::InvalidArgument,
    );
    assert!(m.contains("control characters"), "{m}");
    assert_eq!(device_names(&mut bdevs).await, ["m0"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflection_v1alpha_lists_every_service() {
    use tonic_reflection::pb::v1alpha::ServerReflectionRequest;
    use tonic_reflection::pb::v1alpha::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1alpha::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1alpha::server_reflection_response::MessageResponse;

    let d = Daemon::start_quiet(Vec::<String>::new());
    let mut client = ServerReflectionClient::new(d.channel().await);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut answers = client
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .expect("v1alpha reflection call")
        .into_inner();
    let list = answers.message().await.unwrap().unwrap().message_response;
    let Some(MessageResponse::ListServicesResponse(list)) = list else {
        panic!("expected a service list, got {list:?}");
    };
    let names: BTreeSet<_> = list.service.into_iter().map(|s| s.name).collect();
    let ours = ["Bdev", "Stats", "Engine", "Perf", "Export", "Accel"]
        .map(|s| format!("io_engine.v1.{s}Service"))
        .into_iter()
        .chain(["grpc.health.v1.Health".to_owned()]);
    let missing: Vec<_> = ours.filter(|s| !names.contains(s)).collect();
    assert!(missing.is_empty(), "{missing:?} missing from {names:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_over_the_size_limit_is_refused_before_it_is_decoded() {
    let d = Daemon::start_quiet(["--grpc-max-request-bytes", "4096"]);
    let mut bdevs = BdevServiceClient::new(d.channel().await);
    let name = "n".repeat(8192);
    let m = refused(
        "an 8 KiB request",
        bdevs
            .create(create(format!("malloc:///{name}?size_mb=1")))
            .await,
        Code::OutOfRange,
    );
    assert!(m.contains("4096"), "{m}");
    // Under the limit, the request is served as before.
    let name = "n".repeat(2048);
    refused(
        "a 2 KiB request",
        bdevs
            .create(create(format!("malloc:///{name}?size_mb=1")))
            .await,
        Code::InvalidArgument,
    );
    bdevs
        .create(create("malloc:///m1?size_mb=1"))
        .await
        .expect("a small request");
}

/// `/metrics` answers within 1 s.
fn scrape_within_1s(d: &Daemon) {
    let start = Instant::now();
    let r = http::get(&d.metrics_url()).expect("GET /metrics");
    assert!(r.text().contains("io_engine_"), "a scrape");
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "/metrics took {:?}",
        start.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_beyond_the_bound_is_refused_at_once_and_the_rest_keeps_serving() {
    const BOUND: usize = 4;
    const FLOOD: usize = 48;
    let d = Daemon::start_quiet([
        "--grpc-max-concurrent-requests",
        "4",
        "--grpc-request-timeout",
        "1",
        "--bdev",
        "null:///n0?size_mb=64",
        "--bdev",
        "malloc:///m0?size_mb=4",
        "--share",
        "m0",
    ]);
    let channel = d.channel().await;

    // BOUND perf runs of 5 s hold every place (and outlive the 1 s
    // timeout: a perf run is bounded by its own run time).
    let runs: Vec<_> = (0..BOUND)
        .map(|_| {
            let mut perf = PerfServiceClient::new(channel.clone());
            tokio::spawn(async move {
                perf.run(pb::RunPerfRequest {
                    bdevs: vec!["n0".into()],
                    workload: "randread".into(),
                    io_size: 4096,
                    queue_depth: 4,
                    seconds: 5.0,
                    ..Default::default()
                })
                .await
            })
        })
        .collect();
    // Wait until they hold every place: a counted request is refused. Not
    // asked at once: a request while theirs arrive could take one's place.
    let mut info = EngineServiceClient::new(channel.clone());
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        match info.get_info(pb::GetInfoRequest {}).await {
            Err(s) if s.code() == Code::ResourceExhausted => break,
            r if Instant::now() > deadline => panic!(
                "the perf runs never held every place ({} ended; GetInfo: {r:?})\n{}",
                runs.iter().filter(|r| r.is_finished()).count(),
                d.stderr()
            ),
            _ => {}
        }
    }

    // The flood: every Create refused at once, over several connections.
    let mut connections = Vec::new();
    for _ in 0..4 {
        connections.push(d.channel().await);
    }
    let start = Instant::now();
    let flood: Vec<_> = (0..FLOOD)
        .map(|i| {
            let mut bdevs = BdevServiceClient::new(connections[i % 4].clone());
            tokio::spawn(async move {
                let r = bdevs
                    .create(create(format!("malloc:///f{i}?size_mb=1")))
                    .await;
                (r, Instant::now())
            })
        })
        .collect();
    // Meanwhile health, /metrics and the NBD data path answer.
    let mut health = HealthClient::new(d.channel().await);
    let asked = Instant::now();
    let serving = health
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .expect("health is never refused");
    assert_eq!(serving.into_inner().status, ServingStatus::Serving as i32);
    assert!(
        asked.elapsed() < Duration::from_secs(1),
        "health took {:?}",
        asked.elapsed()
    );
    let metrics_daemon = &d;
    tokio::task::block_in_place(|| scrape_within_1s(metrics_daemon));
    let nbd = d.nbd_uri("m0");
    let copied = tokio::task::spawn_blocking(move || {
        let dir = std::env::temp_dir().join(format!("io-engine-limits-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (src, back) = (dir.join("in"), dir.join("out"));
        let data: Vec<u8> = (0..4u32 << 20).map(|i| (i * 7 + i / 4096) as u8).collect();
        std::fs::write(&src, &data).unwrap();
        let start = Instant::now();
        for (from, to) in [
            (src.to_str().unwrap(), nbd.as_str()),
            (nbd.as_str(), back.to_str().unwrap()),
        ] {
            let out = std::process::Command::new("nbdcopy")
                .args([from, to])
                .output()
                .expect("nbdcopy runs");
            assert!(out.status.success(), "nbdcopy {from} {to}: {out:?}");
        }
        let same = std::fs::read(&back).unwrap() == data;
        let _ = std::fs::remove_dir_all(&dir);
        (same, start.elapsed())
    })
    .await
    .unwrap();
    assert!(copied.0, "the data read back over NBD differs");
    assert!(
        copied.1 < Duration::from_secs(5),
        "NBD round trip took {:?}",
        copied.1
    );
    for f in flood {
        let (r, at) = f.await.unwrap();
        refused("a Create beyond the bound", r, Code::ResourceExhausted);
        assert!(
            at - start < Duration::from_secs(1),
            "refused after {:?}, not at once",
            at - start
        );
    }

    // The perf runs finish, past the 1 s timeout.
    for r in runs {
        let answer = r.await.unwrap().expect("a perf run is not timed out");
        assert!(answer.into_inner().total.unwrap().ios > 0);
    }

    // Afterwards: a flood with nothing held. Each Create succeeds or is
    // refused; the devices are exactly the successes.
    let flood: Vec<_> = (0..FLOOD)
        .map(|i| {
            let mut bdevs = BdevServiceClient::new(connections[i % 4].clone());
            tokio::spawn(async move {
                bdevs
                    .create(create(format!("malloc:///g{i}?size_mb=1")))
                    .await
            })
        })
        .collect();
    let mut created = Vec::new();
    for (i, f) in flood.into_iter().enumerate() {
        match f.await.unwrap() {
            Ok(_) => created.push(format!("g{i}")),
            Err(s) => assert_eq!(s.code(), Code::ResourceExhausted, "{s:?}"),
        }
    }
    let mut bdevs = BdevServiceClient::new(channel.clone());
    let mut names = device_names(&mut bdevs).await;
    names.retain(|n| n.starts_with('f') || n.starts_with('g'));
    names.sort();
    created.sort();
    assert_eq!(names, created, "devices created = successes");
    for name in created {
        bdevs
            .destroy(pb::DestroyBdevRequest { name })
            .await
            .expect("Destroy");
    }
    let mut names = device_names(&mut bdevs).await;
    names.sort();
    assert_eq!(names, ["m0", "n0"]);
    bdevs
        .create(create("malloc:///m1?size_mb=1"))
        .await
        .expect("a Create once the flood is over");
    scrape_within_1s(&d);
}
