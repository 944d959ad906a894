//! The deployment files, checked offline by the tools their formats have
//! (each also shown to reject a broken input, so its verdict means
//! something), and against the real daemon:
//!
//! - the Dockerfile by hadolint (`--failure-threshold error`);
//! - every YAML file, and the chart's rendered output, by yamllint;
//! - every Kubernetes manifest, the kustomizations' output and
//!   `helm template` output by `kubernetes-validate --strict`; the chart by
//!   `helm lint --strict`, its values by its schema;
//! - what the DaemonSets must say (whole cores and as many reactors,
//!   hugepages, a startup and a readiness probe but no liveness probe,
//!   OnDelete updates, a priority class, the x86-64 nodes, grace period,
//!   privilege and /dev/vfio only for VFIO), and their Service (not-ready
//!   addresses published), in the kustomize and Helm renderings;
//! - the image they name: what `scripts/build-image` makes;
//! - the poll mode: adaptive by default, busy one value away;
//! - the docs' order: the namespace's Pod Security label before the install;
//! - the engine configs they ship started by the real daemon;
//! - gRPC: plaintext on the node's address only when said (--grpc-insecure
//!   or the config's grpc-insecure), else on the loopback; with TLS, the
//!   Secret mounted read-only, the flags on its files, io-engine-ctl's
//!   environment and exec probes, and the real daemon started with them
//!   answering the probe's command over (m)TLS;
//! - the scrape configs by `promtool check config`.
//!
//! The dashboard and the alert rules are checked in `monitoring.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use io_engine_tests::daemon::{Daemon, clean_command, ctl_bin};
use io_engine_tests::tools::{
    TempDir, run_ok, run_tool, said, system_tool, tool, yaml_documents, yaml_file,
};
use io_engine_tests::{available_cpus, workspace_root};
use serde_json::Value;

const CHART: &str = "deploy/helm/io-engine";

/// Values the chart is rendered with (a values file each): the defaults,
/// and the others a user is likely to choose.
const HELM_VARIANTS: &[&str] = &[
    "",
    "ioat:\n  enabled: true\n",
    "serviceMonitor:\n  enabled: true\n  release: kube-prometheus-stack\n",
    "serviceMonitor:\n  enabled: false\n\
     pollMode: busy\n\
     cores: 4\n\
     hugepages: 2Gi\n\
     coreList: \"2-5\"\n\
     tolerations: [{operator: Exists}]\n\
     resources: {memory: 2Gi, extra: {ephemeral-storage: 64Mi}}\n\
     bdevs: [\"null:///n0?size_mb=64\", \"malloc:///m1?size_mb=32&blk_size=4096\"]\n\
     shares: [\"n0:ro\"]\n\
     extraArgs: [\"--nbd-max-connections\", \"8\"]\n",
    "pollMode: busy\ncores: 3\nreactors: 2\n",
    "grpc:\n  tls:\n    enabled: true\n    secretName: engine-grpc-tls\n",
    "grpc:\n  tls: {enabled: true, clientAuth: false, serverName: engine.example}\n",
    "grpc:\n  insecure: false\n",
];

/// Where the renderings mount the gRPC TLS Secret.
const GRPC_TLS_DIR: &str = "/etc/io-engine-tls/grpc";

/// The probes' command where the kubelet's gRPC probe cannot do (TLS, or
/// gRPC on the loopback).
const CTL_PROBE: [&str; 5] = ["io-engine-ctl", "--timeout", "1.5", "engine", "info"];

/// How a rendering serves gRPC: over TLS (and whether it requires client
/// certificates), plaintext on the node's address, or on its loopback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GrpcMode {
    Tls { client_auth: bool },
    Insecure,
    Loopback,
}

/// The gRPC mode of rendering `what`.
fn grpc_mode(what: &str) -> GrpcMode {
    if what.contains("deploy/kubernetes/tls") || what.contains("secretName: engine-grpc-tls") {
        GrpcMode::Tls { client_auth: true }
    } else if what.contains("clientAuth: false") {
        GrpcMode::Tls { client_auth: false }
    } else if what.contains("insecure: false") {
        GrpcMode::Loopback
    } else {
        GrpcMode::Insecure
    }
}

/// Every file of the workspace under `dir` whose name ends in one of `exts`.
fn files_under(dir: &str, exts: &[&str]) -> Vec<String> {
    fn walk(dir: &std::path::Path, exts: &[&str], out: &mut Vec<String>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("a directory entry").path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, exts, out);
            } else if exts
                .iter()
                .any(|x| path.to_string_lossy().ends_with(&format!(".{x}")))
            {
                let rel = path
                    .strip_prefix(workspace_root())
                    .expect("inside the workspace");
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    let mut out = Vec::new();
    walk(&workspace_root().join(dir), exts, &mut out);
    out
}

fn cmd(program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Command {
    let mut c = Command::new(program);
    c.args(args);
    c
}

/// `kubectl kustomize DIR`.
fn kustomize(dir: &str) -> String {
    run_ok(cmd(tool("kubectl"), &["kustomize", dir]), None)
}

/// `helm template` of the chart with `values` (YAML) as a values file.
fn helm_template(values: &str) -> String {
    helm_template_with(values, &[])
}

/// `helm template` with `values` and more arguments (`--api-versions`).
fn helm_template_with(values: &str, more: &[&str]) -> String {
    let dir = TempDir::new("helm-values");
    let file = dir.write("values.yaml", values);
    let file = file.display().to_string();
    let mut args = vec![
        "template",
        "io-engine",
        CHART,
        "--namespace",
        "storage",
        "-f",
        &file,
    ];
    args.extend_from_slice(more);
    run_ok(cmd(tool("helm"), &args), None)
}

/// `helm lint --strict` of the chart with `values`: whether it passed and
/// what it said.
fn helm_lint(values: &str) -> (bool, String) {
    let dir = TempDir::new("helm-lint");
    let file = dir.write("values.yaml", values);
    let file = file.display().to_string();
    let out = run_tool(
        cmd(tool("helm"), &["lint", "--strict", CHART, "-f", &file]),
        None,
    );
    (out.status.success(), said(&out))
}

/// The renderings of the DaemonSet and its companions: (what, documents).
fn renderings() -> Vec<(String, Vec<Value>)> {
    let mut out = vec![
        (
            "kustomize deploy/kubernetes".to_string(),
            yaml_documents(&kustomize("deploy/kubernetes")),
        ),
        (
            "kustomize deploy/kubernetes/ioat".to_string(),
            yaml_documents(&kustomize("deploy/kubernetes/ioat")),
        ),
        (
            "kustomize deploy/kubernetes/monitoring".to_string(),
            yaml_documents(&kustomize("deploy/kubernetes/monitoring")),
        ),
        (
            "kustomize deploy/kubernetes/tls".to_string(),
            yaml_documents(&kustomize("deploy/kubernetes/tls")),
        ),
    ];
    for values in HELM_VARIANTS {
        out.push((
            format!("helm template with {values:?}"),
            yaml_documents(&helm_template(values)),
        ));
    }
    out
}

/// The one document of kind `kind` among `docs`.
fn only<'a>(docs: &'a [Value], kind: &str, what: &str) -> &'a Value {
    let found: Vec<&Value> = docs.iter().filter(|d| d["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "{what}: one {kind}, found {}", found.len());
    found[0]
}

/// Runs `kubernetes-validate --strict` on `input` (a file, or `-` with
/// `stdin`); returns whether it passed and what it said.
fn kubernetes_validate(input: &str, stdin: Option<&[u8]>) -> (bool, String) {
    let out = run_tool(
        cmd(tool("kubernetes-validate"), &["--strict", input]),
        stdin,
    );
    (out.status.success(), said(&out))
}

/// The Prometheus Operator's kinds: only in the monitoring overlay, and
/// outside core Kubernetes' schemas.
const OPERATOR_KINDS: [&str; 2] = ["ServiceMonitor", "PrometheusRule"];

/// Checks a strict validation of `yaml` passed for every resource: an
/// INFO "passed" line for each, and warnings only for the kind that has no
/// schema in core Kubernetes (the Prometheus Operator's ServiceMonitor and
/// PrometheusRule).
fn assert_validated(what: &str, yaml: &str, ok: bool, output: &str) {
    assert!(ok, "kubernetes-validate --strict {what}:\n{output}");
    let mut passed = 0;
    for line in output.lines().filter(|l| !l.trim().is_empty()) {
        if line.starts_with("INFO ") && line.contains(" passed for resource ") {
            passed += 1;
        } else {
            assert!(
                line.starts_with("WARN ")
                    && OPERATOR_KINDS
                        .iter()
                        .any(|k| line.contains(&format!("kind {k}"))),
                "kubernetes-validate {what}: {line}"
            );
        }
    }
    let checkable = yaml_documents(yaml)
        .iter()
        .filter(|d| !OPERATOR_KINDS.iter().any(|k| d["kind"] == *k))
        .count();
    assert_eq!(passed, checkable, "{what}: resources validated\n{output}");
}

#[test]
fn hadolint_accepts_the_dockerfile() {
    let hadolint = tool("hadolint");
    let broken = b"FROM debian:12\nWORKDIR usr/src\nRUN sudo true\n";
    let out = run_tool(
        cmd(
            &hadolint,
            &["--no-color", "--failure-threshold", "error", "-"],
        ),
        Some(broken),
    );
    assert!(!out.status.success(), "hadolint passed a broken Dockerfile");
    assert!(said(&out).contains("DL3000"), "{}", said(&out));

    let out = run_tool(
        cmd(
            &hadolint,
            &["--no-color", "--failure-threshold", "error", "Dockerfile"],
        ),
        None,
    );
    assert!(out.status.success(), "hadolint Dockerfile:\n{}", said(&out));
    // Not even a warning today; keep it that way.
    let out = run_tool(cmd(&hadolint, &["--no-color", "Dockerfile"]), None);
    assert!(out.status.success(), "hadolint warnings:\n{}", said(&out));

    // The build context holds what the Dockerfile copies.
    let ignore =
        std::fs::read_to_string(workspace_root().join(".dockerignore")).expect(".dockerignore");
    for kept in [
        "!Cargo.lock",
        "!io-engine/",
        "!deploy/image/",
        "!target/release/io-engine",
    ] {
        assert!(ignore.lines().any(|l| l == kept), "{kept} in .dockerignore");
    }
    let dockerfile =
        std::fs::read_to_string(workspace_root().join("Dockerfile")).expect("Dockerfile");
    assert!(
        !dockerfile.contains("HEALTHCHECK "),
        "Kubernetes probes gRPC health"
    );
    assert!(dockerfile.contains("\nUSER 10001:10001\n"), "non-root user");
}

#[test]
fn yamllint_accepts_every_yaml_file_and_the_rendered_chart() {
    let yamllint = tool("yamllint");
    let out = run_tool(cmd(&yamllint, &["--strict", "-"]), Some(b"a: 1\na: 2\n"));
    assert!(!out.status.success(), "yamllint passed a duplicate key");

    let mut files = files_under("deploy", &["yaml", "yml"]);
    files.retain(|f| !f.starts_with("deploy/helm/io-engine/templates/"));
    files.push(".yamllint.yaml".into());
    assert!(files.len() >= 12, "{files:?}");
    let mut args = vec!["--strict", "--format", "parsable"];
    args.extend(files.iter().map(String::as_str));
    let out = run_tool(cmd(&yamllint, &args), None);
    assert!(out.status.success(), "yamllint:\n{}", said(&out));

    for values in HELM_VARIANTS {
        let rendered = helm_template(values);
        let out = run_tool(
            cmd(&yamllint, &["--strict", "--format", "parsable", "-"]),
            Some(rendered.as_bytes()),
        );
        assert!(
            out.status.success(),
            "yamllint of helm template with {values:?}:\n{}",
            said(&out)
        );
    }
}

#[test]
fn kubernetes_manifests_validate_strictly() {
    // A misspelt field must fail, or "passed" below would mean little.
    let broken = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\n\
                  spec:\n  selector: {matchLabels: {a: b}}\n  template:\n    \
                  metadata: {labels: {a: b}}\n    spec:\n      hostNetwrk: true\n      \
                  containers: [{name: c, image: i}]\n";
    let (ok, output) = kubernetes_validate("-", Some(broken.as_bytes()));
    assert!(!ok && output.contains("hostNetwrk"), "{output}");

    let files: Vec<String> = files_under("deploy/kubernetes", &["yaml"])
        .into_iter()
        .filter(|f| !f.ends_with("kustomization.yaml"))
        .collect();
    assert_eq!(files.len(), 7, "{files:?}");
    for file in &files {
        let (ok, output) = kubernetes_validate(file, None);
        let text = std::fs::read_to_string(workspace_root().join(file)).expect("a manifest");
        assert_validated(file, &text, ok, &output);
    }
    for dir in [
        "deploy/kubernetes",
        "deploy/kubernetes/ioat",
        "deploy/kubernetes/monitoring",
        "deploy/kubernetes/tls",
    ] {
        let rendered = kustomize(dir);
        let (ok, output) = kubernetes_validate("-", Some(rendered.as_bytes()));
        assert_validated(&format!("kustomize {dir}"), &rendered, ok, &output);
        let kinds: BTreeSet<String> = yaml_documents(&rendered)
            .iter()
            .map(|d| d["kind"].as_str().unwrap_or("?").to_owned())
            .collect();
        let mut expected: BTreeSet<String> = [
            "Namespace",
            "PriorityClass",
            "ConfigMap",
            "DaemonSet",
            "Service",
        ]
        .map(String::from)
        .into();
        // Only the monitoring overlay has the operator's kinds: applying
        // them to a cluster without the Prometheus Operator's CRDs fails.
        if dir.ends_with("monitoring") {
            expected.extend(OPERATOR_KINDS.map(String::from));
        }
        assert_eq!(kinds, expected, "{dir}");
    }
}

#[test]
fn helm_lints_the_chart_and_its_templates_validate_strictly() {
    // The schema refuses what the daemon would refuse at start.
    for bad in [
        "pollMode: sometimes\n",
        "cores: 1.5\n",
        "bdevs: [\"nvme:///x\"]\n",
        "ioat: {enabled: \"yes\"}\n",
        "reactors: -1\n",
    ] {
        let (ok, output) = helm_lint(bad);
        assert!(!ok, "helm lint passed {bad:?}:\n{output}");
    }
    // More reactors than CPUs fails the rendering (helm lint reports a
    // template's `fail` as INFO only, so install is what refuses it).
    let out = run_tool(
        cmd(
            tool("helm"),
            &["template", CHART, "--set", "cores=2", "--set", "reactors=3"],
        ),
        None,
    );
    assert!(
        !out.status.success() && said(&out).contains("reactors (3) must be at most cores (2)"),
        "helm template with reactors > cores:\n{}",
        said(&out)
    );
    for values in HELM_VARIANTS {
        let (ok, output) = helm_lint(values);
        assert!(
            ok && output.contains("0 chart(s) failed"),
            "helm lint with {values:?}:\n{output}"
        );
        let rendered = helm_template(values);
        let (ok, output) = kubernetes_validate("-", Some(rendered.as_bytes()));
        assert_validated(
            &format!("helm template with {values:?}"),
            &rendered,
            ok,
            &output,
        );
    }
    // The ServiceMonitor: by default only where the cluster serves the
    // Prometheus Operator's API (helm install on a cluster without its CRDs
    // would fail), always when asked, never when refused; with the
    // `release` label kube-prometheus-stack selects by, when given.
    const OPERATOR: &[&str] = &["--api-versions", "monitoring.coreos.com/v1"];
    let monitor = |values: &str, more: &[&str]| -> Option<Value> {
        yaml_documents(&helm_template_with(values, more))
            .into_iter()
            .find(|d| d["kind"] == "ServiceMonitor")
    };
    assert!(
        monitor("", &[]).is_none(),
        "no operator API: no ServiceMonitor"
    );
    assert!(
        monitor("", OPERATOR).is_some(),
        "the operator's API: a ServiceMonitor"
    );
    assert!(monitor("serviceMonitor: {enabled: false}\n", OPERATOR).is_none());
    let asked = monitor("serviceMonitor: {enabled: true, release: kps}\n", &[])
        .expect("a ServiceMonitor when asked");
    assert_eq!(asked["metadata"]["labels"]["release"], "kps");
    assert!(monitor("", OPERATOR).unwrap()["metadata"]["labels"]["release"].is_null());
    let (ok, output) = helm_lint("serviceMonitor: {enabled: sometimes}\n");
    assert!(
        !ok,
        "helm lint passed serviceMonitor.enabled: sometimes:\n{output}"
    );
}

/// The container's value of environment variable `name`, as the env entry.
fn env_entry<'a>(container: &'a Value, name: &str) -> Option<&'a Value> {
    container["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)
}

#[test]
fn daemonsets_ask_for_whole_cores_hugepages_probes_and_a_long_enough_grace() {
    for (what, docs) in renderings() {
        let ds = only(&docs, "DaemonSet", &what);
        let ioat = what.contains("ioat");
        let spec = &ds["spec"]["template"]["spec"];
        let pod_labels = &ds["spec"]["template"]["metadata"]["labels"];
        assert_eq!(spec["hostNetwork"], true, "{what}");
        assert!(
            spec["nodeSelector"]
                .as_object()
                .is_some_and(|m| m.len() > 1),
            "{what}: a nodeSelector"
        );
        assert_eq!(
            spec["nodeSelector"]["kubernetes.io/arch"], "amd64",
            "{what}: the image is x86-64 only"
        );
        // The drain takes at most 4.5 s, the teardown after it 0.3 s more.
        let grace = spec["terminationGracePeriodSeconds"].as_u64().unwrap_or(30);
        assert!((6..=30).contains(&grace), "{what}: grace {grace}");
        // A restart loses the node's malloc devices and NBD sessions: the
        // operator chooses when (no rolling update by default), and a new
        // engine is available only after being ready a while.
        assert_eq!(ds["spec"]["updateStrategy"]["type"], "OnDelete", "{what}");
        assert!(
            ds["spec"]["minReadySeconds"]
                .as_u64()
                .is_some_and(|s| s > 0),
            "{what}: minReadySeconds"
        );
        // A priority class, shipped with the rendering (a class of its
        // own) or the system's node-critical one.
        let class = spec["priorityClassName"]
            .as_str()
            .unwrap_or_else(|| panic!("{what}: no priorityClassName"));
        assert!(
            class == "system-node-critical"
                || docs
                    .iter()
                    .any(|d| d["kind"] == "PriorityClass" && d["metadata"]["name"] == class),
            "{what}: PriorityClass {class} is not shipped"
        );

        let containers = spec["containers"].as_array().expect("containers");
        assert_eq!(containers.len(), 1, "{what}");
        let c = &containers[0];
        // Guaranteed QoS with whole CPUs: the static CPU manager's condition.
        let requests = &c["resources"]["requests"];
        let limits = &c["resources"]["limits"];
        assert_eq!(requests, limits, "{what}: requests = limits");
        let cpu = requests["cpu"].as_str().expect("a cpu request");
        assert!(
            cpu.parse::<u32>().is_ok_and(|n| n >= 1),
            "{what}: whole CPUs, got {cpu}"
        );
        assert!(requests["memory"].is_string(), "{what}: memory");
        assert!(requests["hugepages-2Mi"].is_string(), "{what}: hugepages");

        // As many reactors as whole CPUs (or `reactors`, fewer), unless a
        // list names the cores; the
        // image's entrypoint, with no shell wrapper choosing them.
        assert!(
            c.get("command").is_none_or(Value::is_null),
            "{what}: a command: {}",
            c["command"]
        );
        let value = |name: &str| env_entry(c, name).map(|e| e["value"].clone());
        if what.contains("coreList") {
            assert_eq!(value("IO_ENGINE_CORE_LIST"), Some("2-5".into()), "{what}");
            assert_eq!(value("IO_ENGINE_CORE_COUNT"), None, "{what}");
        } else if what.contains("reactors: 2") {
            // Fewer reactors than CPUs: a CPU for the control plane.
            assert_eq!(cpu, "3", "{what}");
            assert_eq!(value("IO_ENGINE_CORE_COUNT"), Some("2".into()), "{what}");
            assert_eq!(value("IO_ENGINE_CORE_LIST"), None, "{what}");
        } else {
            assert_eq!(value("IO_ENGINE_CORE_COUNT"), Some(cpu.into()), "{what}");
            assert_eq!(value("IO_ENGINE_CORE_LIST"), None, "{what}");
        }

        // The gRPC health service, on the port the engine listens on; or,
        // where the kubelet's gRPC probe cannot reach it (TLS, loopback),
        // io-engine-ctl in the pod.
        let port_of = |name: &str| {
            c["ports"]
                .as_array()
                .and_then(|ps| ps.iter().find(|p| p["name"] == name))
                .map(|p| p["containerPort"].clone())
                .unwrap_or_else(|| panic!("{what}: no {name} port"))
        };
        let grpc_port = port_of("grpc");
        let mode = grpc_mode(&what);
        for probe in ["readinessProbe", "startupProbe"] {
            if mode == GrpcMode::Insecure {
                assert_eq!(c[probe]["grpc"]["port"], grpc_port, "{what}: {probe}");
            } else {
                assert!(c[probe]["grpc"].is_null(), "{what}: {probe}");
                assert_eq!(
                    c[probe]["exec"]["command"],
                    serde_json::json!(CTL_PROBE),
                    "{what}: {probe}"
                );
                assert!(
                    c[probe]["timeoutSeconds"].as_u64().is_some_and(|t| t >= 2),
                    "{what}: {probe} waits longer than io-engine-ctl's 1.5 s"
                );
            }
        }
        // No restart on a slow answer; out of the Service after a few.
        assert!(
            c.get("livenessProbe").is_none_or(Value::is_null),
            "{what}: a liveness probe restarts the engine: {}",
            c["livenessProbe"]
        );
        let threshold = c["readinessProbe"]["failureThreshold"]
            .as_u64()
            .unwrap_or(3);
        assert!(
            threshold >= 3,
            "{what}: readiness failureThreshold {threshold}"
        );
        let grpc_addr = env_entry(c, "IO_ENGINE_GRPC_ADDR").expect("IO_ENGINE_GRPC_ADDR");
        let grpc_host = if mode == GrpcMode::Loopback {
            "127.0.0.1"
        } else {
            "$(POD_IP)"
        };
        assert_eq!(
            grpc_addr["value"].as_str(),
            Some(format!("{grpc_host}:{grpc_port}").as_str()),
            "{what}"
        );
        assert_grpc_tls(&what, mode, &docs, c, spec, &grpc_port);
        for (name, field) in [("NODE_NAME", "spec.nodeName"), ("POD_IP", "status.podIP")] {
            let e = env_entry(c, name).unwrap_or_else(|| panic!("{what}: {name}"));
            assert_eq!(e["valueFrom"]["fieldRef"]["fieldPath"], field, "{what}");
        }

        // Mounts: the config over the image's, hugepages, VFIO with I/OAT
        // only; every volume mounted.
        let volumes: BTreeMap<String, &Value> = spec["volumes"]
            .as_array()
            .expect("volumes")
            .iter()
            .map(|v| (v["name"].as_str().expect("a name").to_owned(), v))
            .collect();
        let mounts: BTreeMap<String, String> = c["volumeMounts"]
            .as_array()
            .expect("mounts")
            .iter()
            .map(|m| {
                (
                    m["mountPath"].as_str().expect("a path").to_owned(),
                    m["name"].as_str().expect("a name").to_owned(),
                )
            })
            .collect();
        assert_eq!(
            volumes[&mounts["/dev/hugepages"]]["emptyDir"]["medium"], "HugePages-2Mi",
            "{what}"
        );
        let mounted: BTreeSet<&String> = mounts.values().collect();
        for name in volumes.keys() {
            assert!(mounted.contains(name), "{what}: volume {name} unmounted");
        }
        let host_paths: Vec<&str> = volumes
            .values()
            .filter_map(|v| v["hostPath"]["path"].as_str())
            .collect();
        let used: &[&str] = if ioat { &["/dev/vfio"] } else { &[] };
        assert_eq!(host_paths, used, "{what}: host paths");
        if ioat {
            assert_eq!(
                volumes[&mounts["/dev/vfio"]]["hostPath"]["path"], "/dev/vfio",
                "{what}"
            );
        }
        let config = volumes[&mounts["/etc/io-engine"]]["configMap"]["name"].clone();
        let cm = only(&docs, "ConfigMap", &what);
        assert_eq!(cm["metadata"]["name"], config, "{what}");
        assert_eq!(
            env_entry(c, "IO_ENGINE_CONFIG").map(|e| e["value"].clone()),
            Some(Value::from("/etc/io-engine/io-engine.toml")),
            "{what}"
        );

        // Privilege only where VFIO needs it.
        let privileged = c["securityContext"]["privileged"] == true;
        assert_eq!(privileged, ioat, "{what}: privileged");
        let args: Vec<&str> = c["args"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        assert_eq!(args.contains(&"--ioat"), ioat, "{what}: {args:?}");
        if !ioat {
            assert_eq!(spec["securityContext"]["runAsNonRoot"], true, "{what}");
            assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
            assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
        }

        // The Service selects these pods and names the metrics port, which
        // the ServiceMonitor (where there is one) scrapes.
        let svc = only(&docs, "Service", &what);
        // A sick engine stays in the DNS answer (a target with up == 0).
        assert_eq!(
            svc["spec"]["publishNotReadyAddresses"], true,
            "{what}: publishNotReadyAddresses"
        );
        for (k, v) in svc["spec"]["selector"].as_object().expect("a selector") {
            assert_eq!(&pod_labels[k], v, "{what}: Service selector {k}");
        }
        let metrics_port = port_of("metrics");
        let svc_port = svc["spec"]["ports"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == "metrics"))
            .expect("a metrics port on the Service");
        assert_eq!(svc_port["port"], metrics_port, "{what}");
        assert_eq!(svc_port["targetPort"], "metrics", "{what}");
        if let Some(sm) = docs.iter().find(|d| d["kind"] == "ServiceMonitor") {
            for (k, v) in sm["spec"]["selector"]["matchLabels"]
                .as_object()
                .expect("matchLabels")
            {
                assert_eq!(
                    &svc["metadata"]["labels"][k], v,
                    "{what}: ServiceMonitor {k}"
                );
            }
            assert_eq!(sm["spec"]["endpoints"][0]["port"], "metrics", "{what}");
            assert_eq!(sm["spec"]["endpoints"][0]["path"], "/metrics", "{what}");
        }
    }
}

/// What a rendering's gRPC mode asks of its container: with TLS, the
/// Secret mounted read-only, the daemon's TLS flags on its files, and
/// io-engine-ctl's https endpoint (after POD_IP, which it refers to) and
/// TLS files; plaintext said explicitly otherwise (`--grpc-insecure`, or
/// the config's `grpc-insecure`) unless on the loopback.
fn assert_grpc_tls(
    what: &str,
    mode: GrpcMode,
    docs: &[Value],
    c: &Value,
    spec: &Value,
    grpc_port: &Value,
) {
    let args: Vec<&str> = c["args"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let value = |name: &str| env_entry(c, name).and_then(|e| e["value"].as_str());
    let index = |name: &str| {
        c["env"]
            .as_array()
            .and_then(|env| env.iter().position(|e| e["name"] == name))
    };
    let config = config_toml(docs, what);
    let insecure = args.contains(&"--grpc-insecure")
        || config.lines().any(|l| l.trim() == "grpc-insecure = true");
    let mount = c["volumeMounts"]
        .as_array()
        .and_then(|ms| ms.iter().find(|m| m["mountPath"] == GRPC_TLS_DIR));
    let GrpcMode::Tls { client_auth } = mode else {
        assert!(mount.is_none(), "{what}: a TLS mount without TLS");
        assert!(
            !args.iter().any(|a| a.starts_with("--grpc-tls")),
            "{what}: {args:?}"
        );
        assert_eq!(insecure, mode == GrpcMode::Insecure, "{what}: {args:?}");
        let host = if mode == GrpcMode::Loopback {
            "127.0.0.1"
        } else {
            "$(POD_IP)"
        };
        assert_eq!(
            value("IO_ENGINE_ENDPOINT"),
            Some(format!("http://{host}:{grpc_port}").as_str()),
            "{what}"
        );
        return;
    };
    // The Secret, read-only, in cert-manager's layout.
    let mount = mount.unwrap_or_else(|| panic!("{what}: no mount at {GRPC_TLS_DIR}"));
    assert_eq!(mount["readOnly"], true, "{what}");
    let volume = spec["volumes"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["name"] == mount["name"]))
        .unwrap_or_else(|| panic!("{what}: no volume {}", mount["name"]));
    let secret = volume["secret"]["secretName"].as_str().unwrap_or_default();
    let expected = if what.contains("secretName: engine-grpc-tls") {
        "engine-grpc-tls"
    } else {
        "io-engine-grpc-tls"
    };
    assert_eq!(secret, expected, "{what}");
    // The daemon's flags on the Secret's files; no plaintext flag.
    let file = |name: &str| format!("{GRPC_TLS_DIR}/{name}");
    for (flag, name) in [
        ("--grpc-tls-cert", "tls.crt"),
        ("--grpc-tls-key", "tls.key"),
    ] {
        assert!(
            args.contains(&format!("{flag}={}", file(name)).as_str()),
            "{what}: {flag} in {args:?}"
        );
    }
    let client_ca = format!("--grpc-tls-client-ca={}", file("ca.crt"));
    assert_eq!(
        args.contains(&client_ca.as_str()),
        client_auth,
        "{what}: {args:?}"
    );
    assert!(!args.contains(&"--grpc-insecure"), "{what}: {args:?}");
    // io-engine-ctl in the pod (kubectl exec, the probes): https, the CA,
    // the Secret's certificate as its client identity under mTLS.
    assert_eq!(
        value("IO_ENGINE_ENDPOINT"),
        Some(format!("https://$(POD_IP):{grpc_port}").as_str()),
        "{what}"
    );
    assert!(
        index("POD_IP") < index("IO_ENGINE_ENDPOINT"),
        "{what}: POD_IP must come before the endpoint that refers to it"
    );
    assert_eq!(
        value("IO_ENGINE_TLS_CA"),
        Some(file("ca.crt").as_str()),
        "{what}"
    );
    let (cert, key) = (file("tls.crt"), file("tls.key"));
    let identity = client_auth.then_some((cert.as_str(), key.as_str()));
    assert_eq!(
        value("IO_ENGINE_TLS_CERT").zip(value("IO_ENGINE_TLS_KEY")),
        identity,
        "{what}"
    );
    assert!(value("IO_ENGINE_TLS_SERVER_NAME").is_some_and(|n| !n.is_empty()));
}

/// `scripts/build-image` with `args` (`--print-ref`: builds nothing).
fn build_image(args: &[&str]) -> String {
    let mut c = cmd(workspace_root().join("scripts/build-image"), args);
    c.env_remove("IO_ENGINE_IMAGE_REPOSITORY");
    run_ok(c, None).trim().to_owned()
}

/// The image of the one container of a rendering's DaemonSet.
fn image_of(docs: &[Value], what: &str) -> String {
    only(docs, "DaemonSet", what)["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: no image"))
        .to_owned()
}

#[test]
fn the_manifests_name_the_image_build_image_makes() {
    let made = build_image(&["--print-ref"]);
    assert_eq!(made, format!("io-engine:{}", env!("CARGO_PKG_VERSION")));
    for (what, docs) in renderings() {
        assert_eq!(image_of(&docs, &what), made, "{what}");
    }
    // A repository of one's own: the same reference on both sides.
    let repo = "registry.example:5000/storage/io-engine";
    let made = build_image(&["--repository", repo, "--print-ref"]);
    assert_eq!(made, format!("{repo}:{}", env!("CARGO_PKG_VERSION")));
    let docs = yaml_documents(&helm_template(&format!("image: {{repository: {repo}}}\n")));
    assert_eq!(image_of(&docs, "helm"), made);
    assert_eq!(build_image(&["--print-ref", "x/y:1"]), "x/y:1");
}

#[test]
fn the_poll_mode_is_adaptive_by_default_and_busy_one_value_away() {
    let mode = |docs: &[Value], what: &str| -> String {
        let toml = config_toml(docs, what);
        toml.lines()
            .find_map(|l| l.trim().strip_prefix("poll-mode = "))
            .unwrap_or_else(|| panic!("{what}: no poll-mode in\n{toml}"))
            .trim_matches('"')
            .to_owned()
    };
    for dir in ["deploy/kubernetes", "deploy/kubernetes/ioat"] {
        assert_eq!(mode(&yaml_documents(&kustomize(dir)), dir), "adaptive");
    }
    assert_eq!(
        mode(&yaml_documents(&helm_template("")), "helm"),
        "adaptive"
    );
    let busy = yaml_documents(&helm_template("pollMode: busy\n"));
    assert_eq!(mode(&busy, "helm pollMode: busy"), "busy");
}

#[test]
fn the_docs_label_the_namespace_before_installing() {
    // Pod Security admission checks pods when they are created: a label
    // set after `helm install` comes after the DaemonSet's pods are refused.
    for doc in [
        "README.md",
        "docs/operations.md",
        "deploy/helm/io-engine/README.md",
    ] {
        let text = std::fs::read_to_string(workspace_root().join(doc)).expect("a doc");
        let install = text.find("helm install ");
        let label = text.find("pod-security.kubernetes.io/enforce=privileged");
        if let Some(install) = install {
            assert!(
                label.is_some_and(|l| l < install),
                "{doc}: the namespace's Pod Security label must come before `helm install`"
            );
        }
    }
}

/// The TOML of the engine config in a rendering's ConfigMap.
fn config_toml(docs: &[Value], what: &str) -> String {
    only(docs, "ConfigMap", what)["data"]["io-engine.toml"]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: no io-engine.toml in the ConfigMap"))
        .to_owned()
}

#[test]
fn the_shipped_engine_configs_start_the_real_daemon() {
    let cpu = available_cpus()[0].to_string();
    let dir = TempDir::new("deploy-config");
    let image_default =
        std::fs::read_to_string(workspace_root().join("deploy/image/io-engine.toml"))
            .expect("the image's config");
    let cases = [
        (
            "kustomize",
            config_toml(
                &yaml_documents(&kustomize("deploy/kubernetes")),
                "kustomize",
            ),
            vec![("m0", false)],
        ),
        (
            "helm defaults",
            config_toml(&yaml_documents(&helm_template("")), "helm"),
            vec![("m0", false)],
        ),
        (
            "helm values",
            config_toml(&yaml_documents(&helm_template(HELM_VARIANTS[3])), "helm"),
            vec![("n0", true)],
        ),
        ("image", image_default, vec![]),
    ];
    for (what, toml, shares) in cases {
        let file = dir.write("io-engine.toml", &toml);
        // As in the pod: the addresses (here loopback, kernel-chosen ports,
        // added by the helper) and the cores come from outside the file;
        // adaptive polling keeps the test cheap.
        let d = Daemon::start([
            "--config",
            &file.display().to_string(),
            "-l",
            &cpu,
            "--poll-mode",
            "adaptive",
        ]);
        let out = d.ctl(["--output", "json", "export", "list"]);
        assert!(out.status.success(), "{what}: {}", said(&out));
        let list: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let got: Vec<(String, bool)> = list["exports"]
            .as_array()
            .expect("exports")
            .iter()
            .map(|e| {
                (
                    e["bdev"].as_str().unwrap_or("").to_owned(),
                    e["read_only"] == true,
                )
            })
            .collect();
        let want: Vec<(String, bool)> = shares.iter().map(|(n, ro)| (n.to_string(), *ro)).collect();
        assert_eq!(got, want, "{what}:\n{toml}");
    }
}

#[test]
fn promtool_accepts_the_scrape_configs() {
    let promtool = system_tool("promtool", "prometheus");
    let dir = TempDir::new("promtool");
    let bad = dir.write(
        "bad.yml",
        "scrape_configs:\n  - job_name: x\n    scrape_interval: often\n",
    );
    let out = run_tool(
        cmd(&promtool, &["check", "config", &bad.display().to_string()]),
        None,
    );
    assert!(!out.status.success(), "promtool passed a bad config");
    for file in [
        "deploy/prometheus/prometheus.yml",
        "deploy/prometheus/kubernetes.yml",
    ] {
        let out = run_tool(cmd(&promtool, &["check", "config", file]), None);
        assert!(
            out.status.success() && said(&out).contains("SUCCESS"),
            "promtool check config {file}:\n{}",
            said(&out)
        );
    }
    // The plain config scrapes the Service's DNS name on the metrics port.
    let docs = yaml_file("deploy/prometheus/kubernetes.yml");
    let sd = &docs[0]["scrape_configs"][0]["dns_sd_configs"][0];
    assert_eq!(sd["port"], 9502);
    assert_eq!(sd["names"][0], "io-engine.io-engine.svc.cluster.local");
}

/// A Secret's files in cert-manager's layout, as the docs ask for them:
/// one certificate for the server and client usages, naming every
/// rendering's server name and 127.0.0.1.
fn cert_manager_secret(dir: &std::path::Path) {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, SanType,
    };
    let ca_key = KeyPair::generate().expect("a CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "cluster CA");
    let ca_pem = ca.self_signed(&ca_key).expect("the CA").pem();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().expect("a key");
    let mut leaf = CertificateParams::new(vec![
        "io-engine.storage.svc".to_string(),
        "io-engine.io-engine.svc".to_string(),
        "engine.example".to_string(),
    ])
    .expect("leaf parameters");
    leaf.subject_alt_names
        .push(SanType::IpAddress([127, 0, 0, 1].into()));
    leaf.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let cert = leaf.signed_by(&key, &issuer).expect("the leaf");
    for (name, pem) in [
        ("ca.crt", ca_pem),
        ("tls.crt", cert.pem()),
        ("tls.key", key.serialize_pem()),
    ] {
        std::fs::write(dir.join(name), pem).expect("write the Secret's file");
    }
}

#[test]
fn the_tls_renderings_serve_and_their_probe_answers() {
    let cpu = available_cpus()[0].to_string();
    let dir = TempDir::new("deploy-grpc-tls");
    let secret = dir.path().join("secret");
    std::fs::create_dir_all(&secret).expect("the Secret's directory");
    cert_manager_secret(&secret);
    let secret = secret.display().to_string();
    let mut renderings = vec![(
        "kustomize deploy/kubernetes/tls".to_string(),
        yaml_documents(&kustomize("deploy/kubernetes/tls")),
    )];
    for values in HELM_VARIANTS
        .iter()
        .filter(|v| matches!(grpc_mode(&format!("{v:?}")), GrpcMode::Tls { .. }))
    {
        renderings.push((
            format!("helm template with {values:?}"),
            yaml_documents(&helm_template(values)),
        ));
    }
    assert_eq!(renderings.len(), 3);
    for (what, docs) in renderings {
        let c = &only(&docs, "DaemonSet", &what)["spec"]["template"]["spec"]["containers"][0];
        // The Secret's mount is the temporary directory here; the config
        // file is the rendering's (its grpc-insecure, if any, gives way).
        let local = |v: &str| v.replace(GRPC_TLS_DIR, &secret);
        let config = dir.write("io-engine.toml", &config_toml(&docs, &what));
        let mut args = vec![
            "--config".to_string(),
            config.display().to_string(),
            "-l".into(),
            cpu.clone(),
            "--poll-mode".into(),
            "adaptive".into(),
        ];
        args.extend(
            c["args"]
                .as_array()
                .expect("args")
                .iter()
                .filter_map(Value::as_str)
                .map(local),
        );
        let d = Daemon::start(&args);
        // The probe's command with the container's environment (POD_IP is
        // the loopback here).
        let mut probe = clean_command(ctl_bin());
        for e in c["env"].as_array().expect("env") {
            let (Some(name), Some(value)) = (e["name"].as_str(), e["value"].as_str()) else {
                continue;
            };
            if name == "IO_ENGINE_ENDPOINT" || name.starts_with("IO_ENGINE_TLS_") {
                let port = c["ports"]
                    .as_array()
                    .and_then(|ps| ps.iter().find(|p| p["name"] == "grpc"))
                    .map(|p| p["containerPort"].to_string())
                    .expect("a grpc port");
                let value =
                    local(value).replace(&format!("$(POD_IP):{port}"), &d.grpc_addr().to_string());
                probe.env(name, value);
            }
        }
        let command: Vec<&str> = c["readinessProbe"]["exec"]["command"]
            .as_array()
            .expect("an exec probe")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(command[0], "io-engine-ctl", "{what}");
        probe.args(&command[1..]);
        let out = run_tool(probe, None);
        assert!(
            out.status.success(),
            "{what}: the probe failed: {}",
            said(&out)
        );
        let mutual = !what.contains("clientAuth: false");
        assert_eq!(
            d.stderr().contains("\"grpc_tls\":\"mutual\""),
            mutual,
            "{what}: {}",
            d.stderr()
        );
    }
}
