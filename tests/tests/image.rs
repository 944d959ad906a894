//! The runtime image, really built and run here: `scripts/build-image`
//! (the command docs/operations.md gives) makes a Debian base with
//! debootstrap, imports it into buildah and builds the Dockerfile's runtime
//! stage with the release binaries (`buildah bud --isolation chroot`).
//! It builds under the reference the manifests name (`io-engine:VERSION`)
//! and writes the archive a cluster's nodes import. Inside the image:
//! `io-engine --version`, the unprivileged user, and the daemon started as
//! the DaemonSet starts it (its args and environment, the ConfigMap's
//! config), answering `io-engine-ctl` and exiting 0 on SIGTERM.
//!
//! The image lives in buildah storage of the test's own under
//! TARGET/image/storage; the debootstrap tarball is cached in TARGET/image/,
//! so only a fresh clone's first run fetches packages. debootstrap and
//! buildah need root: as root they run directly, otherwise through sudo
//! (build-image and this test each say which).

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use io_engine_tests::daemon::{ctl_bin, daemon_bin};
use io_engine_tests::tools::{TempDir, run_ok_within, system_tool, yaml_file};
use io_engine_tests::{available_cpus, bin, output_with_timeout, target_dir, workspace_root};
use serde_json::Value;

/// The reference `scripts/build-image` tags by default, and the chart and
/// kustomize name (tests/tests/deploy.rs checks the manifests).
const TAG: &str = concat!("io-engine:", env!("CARGO_PKG_VERSION"));

/// First build: debootstrap of a minimal base (seconds to a minute or two
/// with a slow mirror) and the image; later ones take seconds.
const BUILD_TIMEOUT: Duration = Duration::from_secs(600);

const RUN_TIMEOUT: Duration = Duration::from_secs(60);

fn storage() -> PathBuf {
    target_dir().join("image").join("storage")
}

/// Whether this test runs as root; otherwise buildah runs through sudo, as
/// in `scripts/build-image`.
fn root() -> bool {
    rustix::process::geteuid().is_root()
}

/// `buildah` on the test's storage.
fn buildah(args: &[&str]) -> Command {
    let store = storage();
    let buildah = system_tool("buildah", "buildah");
    let mut cmd = if root() {
        Command::new(buildah)
    } else {
        let mut sudo = Command::new(system_tool("sudo", "sudo"));
        sudo.arg(buildah);
        sudo
    };
    cmd.arg("--root")
        .arg(store.join("root"))
        .arg("--runroot")
        .arg(store.join("run"))
        .args(["--storage-driver", "vfs"])
        .args(args);
    cmd
}

/// Runs `cmd` (at most `timeout`), panics with its output unless it
/// succeeds, and returns its stdout.
fn ok(cmd: Command, timeout: Duration) -> String {
    run_ok_within(cmd, None, timeout)
}

/// A working container of the image, removed when dropped.
struct Container(String);

impl Container {
    fn new() -> Container {
        let id = ok(
            buildah(&["from", "--pull=never", "--quiet", TAG]),
            RUN_TIMEOUT,
        );
        Container(id.trim().to_owned())
    }

    /// `buildah run --isolation chroot` with `opts` (env, volumes), then
    /// `command`; returns its stdout.
    fn run(&self, opts: &[String], command: &[&str]) -> String {
        let mut cmd = buildah(&["run", "--isolation", "chroot"]);
        cmd.args(opts).arg(&self.0).arg("--").args(command);
        ok(cmd, RUN_TIMEOUT)
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = output_with_timeout(buildah(&["rm", &self.0]), RUN_TIMEOUT);
    }
}

/// A port of 127.0.0.1 nothing listens on (as of now).
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

/// Run inside the container, with the DaemonSet's args as "$@": the engine
/// in the background, `io-engine-ctl` until it answers, then SIGTERM and
/// the exit status.
const POD: &str = r#"
io-engine "$@" &
pid=$!
i=0
until io-engine-ctl engine info >/dev/null 2>&1; do
  i=$((i + 1))
  if [ "$i" -gt 100 ] || ! kill -0 "$pid" 2>/dev/null; then
    echo "the engine did not answer" >&2
    kill -KILL "$pid" 2>/dev/null
    exit 3
  fi
  sleep 0.1
done
echo "--- engine info"
io-engine-ctl --output json engine info
echo "--- export list"
io-engine-ctl --output json export list
kill -TERM "$pid"
wait "$pid"
echo "--- exit status $?"
"#;

/// The JSON between `--- NAME` and the next `---` line of `out`.
fn section(out: &str, name: &str) -> Value {
    let start = out
        .find(&format!("--- {name}\n"))
        .unwrap_or_else(|| panic!("no {name} in:\n{out}"))
        + name.len()
        + 5;
    let end = out[start..].find("\n---").map_or(out.len(), |i| start + i);
    serde_json::from_str(&out[start..end]).unwrap_or_else(|e| panic!("{name}: {e}\n{out}"))
}

#[test]
fn the_runtime_image_builds_and_runs_the_daemon_as_the_daemonset_does() {
    // The binaries the image takes, as the suite builds them.
    let engine = daemon_bin();
    ctl_bin();
    bin("bdev-perf");
    let host_version = ok(
        {
            let mut c = Command::new(&engine);
            c.arg("--version");
            c
        },
        RUN_TIMEOUT,
    );

    let started = std::time::Instant::now();
    eprintln!(
        "{}",
        if root() {
            "root: debootstrap and buildah run directly"
        } else {
            "not root: debootstrap and buildah run through sudo"
        }
    );
    // The default reference, and the archive `kind load image-archive`
    // and `ctr images import` take.
    let dir = TempDir::new("image");
    let archive = dir.path().join("io-engine.tar");
    let mut build = Command::new(workspace_root().join("scripts/build-image"));
    build
        .arg("--archive")
        .arg(&archive)
        .current_dir(workspace_root())
        .env_remove("IO_ENGINE_IMAGE_REPOSITORY")
        .env("IO_ENGINE_IMAGE_NO_BUILD", "1")
        .env("IO_ENGINE_IMAGE_STORAGE", storage());
    let out = ok(build, BUILD_TIMEOUT);
    assert_eq!(out.lines().last(), Some(TAG), "{out}");
    eprintln!("image built in {:?}", started.elapsed());

    // A docker-archive of one image named TAG as containerd and the kubelet
    // spell it (docker.io/library/...): what the kubelet looks for once a
    // node imports it. (buildah adds its local name, localhost/...)
    let mut manifest = Command::new("tar");
    manifest.arg("-xOf").arg(&archive).arg("manifest.json");
    let manifest: Value =
        serde_json::from_str(&ok(manifest, RUN_TIMEOUT)).expect("the archive's manifest.json");
    assert_eq!(manifest.as_array().map(Vec::len), Some(1), "{manifest}");
    let kubelet_name = format!("docker.io/library/{TAG}");
    assert!(
        manifest[0]["RepoTags"]
            .as_array()
            .is_some_and(|tags| tags.iter().any(|t| *t == kubelet_name)),
        "{kubelet_name} in {manifest}"
    );
    drop(dir);

    // The image's configuration.
    let inspect = ok(buildah(&["inspect", "--type", "image", TAG]), RUN_TIMEOUT);
    let inspect: Value = serde_json::from_str(&inspect).expect("buildah inspect JSON");
    let config = &inspect["OCIv1"]["config"];
    assert_eq!(config["User"], "10001:10001", "{config}");
    assert_eq!(
        config["Entrypoint"],
        serde_json::json!(["/usr/local/bin/io-engine"]),
        "{config}"
    );
    assert!(
        config["Env"].as_array().is_some_and(|e| e
            .iter()
            .any(|v| v == "IO_ENGINE_CONFIG=/etc/io-engine/io-engine.toml")),
        "{config}"
    );
    let labels = &config["Labels"];
    assert_eq!(labels["org.opencontainers.image.title"], "io-engine");
    assert_eq!(
        labels["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION")
    );
    assert!(
        config.get("Healthcheck").is_none_or(Value::is_null),
        "{config}"
    );

    let ctr = Container::new();
    // The same build as the host's, run on the image's own libraries.
    let version = ctr.run(&[], &["io-engine", "--version"]);
    assert_eq!(version, host_version);
    assert!(version.starts_with(&format!("io-engine {}", env!("CARGO_PKG_VERSION"))));
    assert_eq!(ctr.run(&[], &["id", "-u"]).trim(), "10001");
    for tool in ["io-engine-ctl", "bdev-perf"] {
        let help = ctr.run(&[], &[tool, "--help"]);
        assert!(help.contains("Usage"), "{tool}: {help}");
    }

    // As the DaemonSet starts it: the image's entrypoint with its args
    // (and --poll-mode adaptive), its environment (the reactor count), the
    // ConfigMap's config over the image's, the addresses here loopback.
    let ds = yaml_file("deploy/kubernetes/base/daemonset.yaml");
    let container = &ds[0]["spec"]["template"]["spec"]["containers"][0];
    assert!(container.get("command").is_none(), "{container}");
    let mut args: Vec<&str> = container["args"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    args.extend(["--poll-mode", "adaptive"]);
    let env: Vec<String> = container["env"]
        .as_array()
        .expect("the DaemonSet's env")
        .iter()
        .filter_map(|e| {
            Some(format!(
                "--env={}={}",
                e["name"].as_str()?,
                e["value"].as_str()?
            ))
        })
        .filter(|e| !e.contains("$("))
        .collect();
    let count: usize = container["env"]
        .as_array()
        .and_then(|env| env.iter().find(|e| e["name"] == "IO_ENGINE_CORE_COUNT"))
        .and_then(|e| e["value"].as_str()?.parse().ok())
        .expect("IO_ENGINE_CORE_COUNT in the DaemonSet");
    let cm = yaml_file("deploy/kubernetes/base/configmap.yaml");
    let toml = cm[0]["data"]["io-engine.toml"]
        .as_str()
        .expect("the config");
    // The ConfigMap's poll mode turned busy here: the args' adaptive must
    // win, which shows the args reach the engine.
    assert!(toml.contains("poll-mode = \"adaptive\""), "{toml}");
    let toml = toml.replace("poll-mode = \"adaptive\"", "poll-mode = \"busy\"");
    let dir = TempDir::new("image-config");
    dir.write("io-engine.toml", &toml);
    let (grpc, metrics, nbd, nvmf) = (free_port(), free_port(), free_port(), free_port());
    let mut opts = vec![
        format!("--volume={}:/etc/io-engine:ro", dir.path().display()),
        format!("--env=IO_ENGINE_GRPC_ADDR=127.0.0.1:{grpc}"),
        format!("--env=IO_ENGINE_METRICS_ADDR=127.0.0.1:{metrics}"),
        format!("--env=IO_ENGINE_NBD_ADDR=127.0.0.1:{nbd}"),
        format!("--env=IO_ENGINE_NVMF_ADDR=127.0.0.1:{nvmf}"),
        format!("--env=IO_ENGINE_ENDPOINT=http://127.0.0.1:{grpc}"),
    ];
    opts.extend(env);
    let mut command = vec!["sh", "-c", POD, "sh"];
    command.extend(args);
    let out = ctr.run(&opts, &command);
    let info = section(&out, "engine info");
    assert_eq!(
        info["poll_mode"], "adaptive",
        "args reach the engine: {info}"
    );
    assert_eq!(info["version"], env!("CARGO_PKG_VERSION"));
    let exports = section(&out, "export list");
    assert_eq!(
        exports["exports"][0]["bdev"], "m0",
        "the ConfigMap's share: {exports}"
    );
    assert_eq!(
        exports["exports"][0]["uri"],
        format!("nbd://127.0.0.1:{nbd}/m0"),
        "{exports}"
    );
    assert!(out.trim_end().ends_with("--- exit status 0"), "{out}");
    // IO_ENGINE_CORE_COUNT reactors on CPUs of the cpuset.
    let available = available_cpus();
    let cores: Vec<u32> = info["cores"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|c| c.as_u64()?.try_into().ok())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        cores.len(),
        count.min(available.len()),
        "IO_ENGINE_CORE_COUNT={count} reactors: {info}"
    );
    assert!(
        cores.iter().all(|c| available.contains(c)),
        "the cores of the cpuset {available:?}: {info}"
    );
    eprintln!("image test done in {:?}", started.elapsed());
}
