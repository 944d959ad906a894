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
//! - gRPC: mutual TLS by default where the cluster serves cert-manager's
//!   API (the chart's Issuers and Certificate), plaintext on the node's
//!   address only when said (--grpc-insecure), else on the loopback; with
//!   TLS, the Secret mounted read-only, the flags on its files,
//!   io-engine-ctl's environment and exec probes, and the real daemon
//!   started with them answering the probe's command over (m)TLS;
//! - NBD and NVMe/TCP on the node's address, in the Service, and the
//!   install notes' attach line for each share (NBD URI, `nvme connect`
//!   with the NQN the real daemon gives the share; never a secret);
//! - the custom resources (cert-manager's, the Prometheus Operator's)
//!   against their CRDs' schemas (tests/schemas/), with the kustomize
//!   components combined (tls, monitoring, ioat);
//! - one `release` label for the ServiceMonitor and the PrometheusRule;
//!   "no hugepages" (hugepages: 0);
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

/// The chart's values file for cert-manager's API: `helm template` is told
/// the cluster serves it (`--api-versions`) when a values file starts with
/// this comment.
const CERT_MANAGER: &str = "# --api-versions cert-manager.io/v1\n";

/// Shares over each protocol, read-only and with an NQN of their own, with
/// the devices they need.
const SHARES_VALUES: &str = "bdevs: [\"malloc:///m0?size_mb=16\", \"malloc:///m1?size_mb=16\", \
     \"malloc:///m2?size_mb=16\", \"malloc:///m3?size_mb=16\"]\n\
     shares: [m0, \"m1:nvmf\", \"m2:nbd:ro\", \
     \"m3:nvmf:ro:nqn=nqn.2019-05.io.example:pvc-1:host=nqn.2014-08.org.nvmexpress:uuid:\
     f81d4fae-7dec-11d0-a765-00a0c91e6bf6:dhchap=DHHC-1:01:hEnUUvkYQmpKZg79k5wrpLop1kvsXAj3NXVWY8r5vg1Cyk0d:\"]\n\
     ports: {nbd: 10810, nvmf: 4421}\n";

/// Values the chart is rendered with (a values file each): the defaults
/// (without and with cert-manager's API), and the others a user is likely
/// to choose.
const HELM_VARIANTS: &[&str] = &[
    "",
    CERT_MANAGER,
    "ioat:\n  enabled: true\n",
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
    "serviceMonitor:\n  enabled: true\nprometheusRelease: kube-prometheus-stack\n",
    "pollMode: busy\ncores: 3\nreactors: 2\n",
    "grpc:\n  tls:\n    enabled: true\n    secretName: engine-grpc-tls\n",
    "# --api-versions cert-manager.io/v1\n\
     grpc:\n  tls: {enabled: true, clientAuth: false, serverName: engine.example}\n",
    "grpc:\n  insecure: true\n",
    "# --api-versions cert-manager.io/v1\ngrpc:\n  tls: {enabled: false}\n",
    "hugepages: 0\nresources: {memory: 2Gi}\n",
    SHARES_VALUES,
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

/// The gRPC mode of rendering `what` (a kustomize directory, or a helm
/// values file).
fn grpc_mode(what: &str) -> GrpcMode {
    if what.starts_with("kustomize") {
        return match what.contains("tls") {
            true => GrpcMode::Tls { client_auth: true },
            false => GrpcMode::Loopback,
        };
    }
    if what.contains("clientAuth: false") {
        GrpcMode::Tls { client_auth: false }
    } else if what.contains("secretName: engine-grpc-tls") {
        GrpcMode::Tls { client_auth: true }
    } else if what.contains("insecure: true") {
        GrpcMode::Insecure
    } else if what.contains("tls: {enabled: false}") {
        GrpcMode::Loopback
    } else if what.contains("cert-manager.io/v1") {
        GrpcMode::Tls { client_auth: true }
    } else {
        GrpcMode::Loopback
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

/// `kubectl kustomize` of a user's kustomization outside the repository:
/// the base and `components` (of deploy/kubernetes/components/) combined.
fn kustomize_components(components: &[&str]) -> String {
    let dir = TempDir::new("kustomize-components");
    // kustomize takes relative paths only.
    let up = "../".repeat(dir.path().components().count().saturating_sub(1));
    let root = format!(
        "{up}{}",
        workspace_root()
            .display()
            .to_string()
            .trim_start_matches('/')
    );
    let mut text = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
         namespace: io-engine\nresources:\n  - {root}/deploy/kubernetes/base\ncomponents:\n"
    );
    for c in components {
        text.push_str(&format!("  - {root}/deploy/kubernetes/components/{c}\n"));
    }
    dir.write("kustomization.yaml", &text);
    kustomize(&dir.path().display().to_string())
}

/// `helm template` of the chart with `values` (YAML) as a values file.
fn helm_template(values: &str) -> String {
    helm_template_with(values, &[])
}

/// `helm template` with `values` and more arguments (`--api-versions`;
/// also those of `# --api-versions API` lines of `values`).
fn helm_template_with(values: &str, more: &[&str]) -> String {
    helm_template_of(CHART, values, more)
}

/// [`helm_template_with`] of the chart in directory `chart`.
fn helm_template_of(chart: &str, values: &str, more: &[&str]) -> String {
    let dir = TempDir::new("helm-values");
    let file = dir.write("values.yaml", values);
    let file = file.display().to_string();
    let mut args = vec![
        "template",
        "io-engine",
        chart,
        "--namespace",
        "storage",
        "-f",
        &file,
    ];
    for api in values
        .lines()
        .filter_map(|l| l.strip_prefix("# --api-versions "))
    {
        args.extend(["--api-versions", api]);
    }
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
        (
            "kustomize base + components tls, monitoring, ioat".to_string(),
            yaml_documents(&kustomize_components(&["tls", "monitoring", "ioat"])),
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

/// cert-manager's kinds the TLS renderings make.
const CERT_MANAGER_KINDS: [&str; 2] = ["Certificate", "Issuer"];

/// Every custom kind: outside core Kubernetes' schemas, checked against
/// the vendored CRD schemas (tests/schemas/) instead.
const CUSTOM_KINDS: [&str; 4] = ["ServiceMonitor", "PrometheusRule", "Certificate", "Issuer"];

/// Checks a strict validation of `yaml` passed for every resource: an
/// INFO "passed" line for each, and warnings only for the kinds that have
/// no schema in core Kubernetes (the Prometheus Operator's and
/// cert-manager's, which [`assert_custom_resources_valid`] checks).
fn assert_validated(what: &str, yaml: &str, ok: bool, output: &str) {
    assert!(ok, "kubernetes-validate --strict {what}:\n{output}");
    let mut passed = 0;
    for line in output.lines().filter(|l| !l.trim().is_empty()) {
        if line.starts_with("INFO ") && line.contains(" passed for resource ") {
            passed += 1;
        } else {
            assert!(
                line.starts_with("WARN ")
                    && CUSTOM_KINDS
                        .iter()
                        .any(|k| line.contains(&format!("kind {k}"))),
                "kubernetes-validate {what}: {line}"
            );
        }
    }
    let checkable = yaml_documents(yaml)
        .iter()
        .filter(|d| !CUSTOM_KINDS.iter().any(|k| d["kind"] == *k))
        .count();
    assert_eq!(passed, checkable, "{what}: resources validated\n{output}");
    assert_custom_resources_valid(what, yaml);
}

/// Runs tests/schemas/validate.py on `yaml`: whether it passed, and what
/// it said.
fn validate_custom_resources(yaml: &str) -> (bool, String) {
    let out = run_tool(
        cmd(tool("python"), &["tests/schemas/validate.py"]),
        Some(yaml.as_bytes()),
    );
    (out.status.success(), said(&out))
}

/// Checks every custom resource of `yaml` is valid against its CRD's
/// vendored schema (one "valid" line each, no "invalid" line).
fn assert_custom_resources_valid(what: &str, yaml: &str) {
    let (ok, output) = validate_custom_resources(yaml);
    assert!(ok, "{what}: custom resources:\n{output}");
    let custom = yaml_documents(yaml)
        .iter()
        .filter(|d| CUSTOM_KINDS.iter().any(|k| d["kind"] == *k))
        .count();
    let valid = output.lines().filter(|l| l.starts_with("valid ")).count();
    assert_eq!(
        valid, custom,
        "{what}: custom resources validated\n{output}"
    );
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

    // Not the shares' values: a share with a host's DH-HMAC-CHAP secret is
    // a TOML string longer than yamllint's line; the chart's own layout is
    // the same in every variant.
    for values in HELM_VARIANTS.iter().filter(|v| **v != SHARES_VALUES) {
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

    // And so must a custom resource with a misspelt field or a wrong value.
    let broken = "apiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata: {name: x}\n\
                  spec: {secretName: s, issuerRef: {name: i}, usages: [server auth], isCa: true}\n\
                  ---\napiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\n\
                  metadata: {name: y}\nspec: {selector: {}, endpoints: [{port: m, interval: often}]}\n";
    let (ok, output) = validate_custom_resources(broken);
    assert!(
        !ok && output.contains("'isCa' was unexpected")
            && output.contains("'often' does not match"),
        "{output}"
    );

    let files: Vec<String> = files_under("deploy/kubernetes", &["yaml"])
        .into_iter()
        .filter(|f| !f.ends_with("kustomization.yaml"))
        .collect();
    assert_eq!(files.len(), 8, "{files:?}");
    for file in &files {
        let (ok, output) = kubernetes_validate(file, None);
        let text = std::fs::read_to_string(workspace_root().join(file)).expect("a manifest");
        assert_validated(file, &text, ok, &output);
    }
    let mut renderings: Vec<(String, String)> = [
        "deploy/kubernetes",
        "deploy/kubernetes/ioat",
        "deploy/kubernetes/monitoring",
        "deploy/kubernetes/tls",
    ]
    .iter()
    .map(|dir| (dir.to_string(), kustomize(dir)))
    .collect();
    // The components combine: one Namespace, every component's objects.
    for combo in [
        &["tls", "monitoring"][..],
        &["tls", "monitoring", "ioat"],
        &["monitoring", "ioat"],
    ] {
        renderings.push((combo.join("+"), kustomize_components(combo)));
    }
    for (what, rendered) in renderings {
        let (ok, output) = kubernetes_validate("-", Some(rendered.as_bytes()));
        assert_validated(&format!("kustomize {what}"), &rendered, ok, &output);
        let docs = yaml_documents(&rendered);
        let kinds: Vec<String> = docs
            .iter()
            .map(|d| d["kind"].as_str().unwrap_or("?").to_owned())
            .collect();
        let mut expected: Vec<&str> = vec![
            "Namespace",
            "PriorityClass",
            "ConfigMap",
            "DaemonSet",
            "Service",
        ];
        // Only the monitoring component has the operator's kinds, only the
        // tls one cert-manager's: applying them to a cluster without those
        // CRDs fails.
        if what.contains("monitoring") {
            expected.extend(OPERATOR_KINDS);
        }
        if what.contains("tls") {
            // The self-signed Issuer, the CA Certificate, the CA Issuer,
            // the engines' Certificate.
            expected.extend(CERT_MANAGER_KINDS);
            expected.extend(CERT_MANAGER_KINDS);
        }
        let mut kinds_sorted = kinds.clone();
        kinds_sorted.sort();
        expected.sort();
        assert_eq!(kinds_sorted, expected, "{what}");
        // Everything namespaced lands in the engines' namespace.
        for d in &docs {
            if !["Namespace", "PriorityClass"].contains(&d["kind"].as_str().unwrap_or("")) {
                assert_eq!(
                    d["metadata"]["namespace"], "io-engine",
                    "{what}: {}",
                    d["kind"]
                );
            }
        }
        let ds = only(&docs, "DaemonSet", &what);
        let c = &ds["spec"]["template"]["spec"]["containers"][0];
        let args = c["args"].to_string();
        assert_eq!(args.contains("--ioat"), what.contains("ioat"), "{what}");
        assert_eq!(
            args.contains("--grpc-tls-cert"),
            what.contains("tls"),
            "{what}"
        );
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
        // Each also where both operators' APIs are served: every object
        // the chart can make, the custom ones against their CRDs' schemas.
        for more in [&[][..], &["--api-versions", "monitoring.coreos.com/v1"]] {
            let rendered = helm_template_with(values, more);
            let (ok, output) = kubernetes_validate("-", Some(rendered.as_bytes()));
            assert_validated(
                &format!("helm template with {values:?} {more:?}"),
                &rendered,
                ok,
                &output,
            );
        }
    }
    // The schema refuses what it no longer knows (one release label now)
    // and "no hugepages" spelt otherwise than 0 or "".
    for bad in [
        "serviceMonitor: {release: kps}\n",
        "prometheusRule: {release: kps}\n",
        "hugepages: 0Mi\n",
        "grpc: {tls: {enabled: sometimes}}\n",
        "ports: {nvmf: 0}\n",
    ] {
        let (ok, output) = helm_lint(bad);
        assert!(!ok, "helm lint passed {bad:?}:\n{output}");
    }
    // Contradictions and impossible asks fail the rendering, saying why.
    for (values, says) in [
        (
            "grpc: {insecure: true, tls: {enabled: true, secretName: s}}\n",
            "choose one",
        ),
        (
            "grpc: {tls: {enabled: true}}\n",
            "needs cert-manager (API cert-manager.io/v1)",
        ),
    ] {
        let dir = TempDir::new("helm-fail");
        let file = dir.write("values.yaml", values).display().to_string();
        let out = run_tool(cmd(tool("helm"), &["template", CHART, "-f", &file]), None);
        assert!(
            !out.status.success() && said(&out).contains(says),
            "helm template with {values:?}:\n{}",
            said(&out)
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
    let asked = monitor(
        "serviceMonitor: {enabled: true}\nprometheusRelease: kps\n",
        &[],
    )
    .expect("a ServiceMonitor when asked");
    assert_eq!(asked["metadata"]["labels"]["release"], "kps");
    // One value labels both kinds: kube-prometheus-stack selects each by
    // it, and a rule without it would silently never be evaluated.
    let both = yaml_documents(&helm_template_with(
        "prometheusRelease: kube-prometheus-stack\n",
        OPERATOR,
    ));
    for kind in OPERATOR_KINDS {
        let d = only(&both, kind, "prometheusRelease");
        assert_eq!(
            d["metadata"]["labels"]["release"], "kube-prometheus-stack",
            "{kind}"
        );
    }
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
        // Hugepages, unless the values say none (hugepages: 0): then no
        // request, no limit, no volume.
        let hugepages = !what.contains("hugepages: 0");
        assert_eq!(
            requests["hugepages-2Mi"].is_string(),
            hugepages,
            "{what}: hugepages"
        );

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
        // gRPC's address: the variable's, else the config file's.
        let config = config_toml(&docs, &what);
        let grpc_addr = env_entry(c, "IO_ENGINE_GRPC_ADDR")
            .and_then(|e| e["value"].as_str())
            .map(String::from)
            .or_else(|| {
                config.lines().find_map(|l| {
                    let v = l.trim().strip_prefix("grpc-addr = ")?;
                    Some(v.trim_matches('"').to_owned())
                })
            })
            .unwrap_or_else(|| panic!("{what}: no gRPC address"));
        let grpc_host = if mode == GrpcMode::Loopback {
            "127.0.0.1"
        } else {
            "$(POD_IP)"
        };
        assert_eq!(grpc_addr, format!("{grpc_host}:{grpc_port}"), "{what}");
        // NBD and NVMe/TCP on the node's address (the pod's IP, with the
        // host network), on the ports the container names.
        for (var, port) in [
            ("IO_ENGINE_NBD_ADDR", "nbd"),
            ("IO_ENGINE_NVMF_ADDR", "nvmf"),
        ] {
            assert_eq!(
                env_entry(c, var).and_then(|e| e["value"].as_str()),
                Some(format!("$(POD_IP):{}", port_of(port)).as_str()),
                "{what}: {var}"
            );
        }
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
        if hugepages {
            assert_eq!(
                volumes[&mounts["/dev/hugepages"]]["emptyDir"]["medium"], "HugePages-2Mi",
                "{what}"
            );
        } else {
            assert!(!mounts.contains_key("/dev/hugepages"), "{what}");
            assert!(
                !volumes
                    .values()
                    .any(|v| v["emptyDir"]["medium"] == "HugePages-2Mi"),
                "{what}"
            );
        }
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
        // Its ports: what each engine serves on the node's address; gRPC
        // only where it is served there.
        let svc_ports: BTreeSet<&str> = svc["spec"]["ports"]
            .as_array()
            .expect("the Service's ports")
            .iter()
            .filter_map(|p| p["name"].as_str())
            .collect();
        let mut served = BTreeSet::from(["metrics", "nbd", "nvmf"]);
        if mode != GrpcMode::Loopback {
            served.insert("grpc");
        }
        assert_eq!(svc_ports, served, "{what}");
        for name in served {
            let svc_port = svc["spec"]["ports"]
                .as_array()
                .and_then(|ps| ps.iter().find(|p| p["name"] == name))
                .expect("a port on the Service");
            assert_eq!(svc_port["port"], port_of(name), "{what}: {name}");
            assert_eq!(svc_port["targetPort"], name, "{what}");
        }
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
        // The CLI's endpoint: the variable's, else its default (the
        // loopback's port 10124).
        assert_eq!(
            value("IO_ENGINE_ENDPOINT").unwrap_or("http://127.0.0.1:10124"),
            format!("http://{host}:{grpc_port}"),
            "{what}"
        );
        // No certificates made where they are not used.
        for kind in CERT_MANAGER_KINDS {
            assert!(!docs.iter().any(|d| d["kind"] == kind), "{what}: a {kind}");
        }
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
    // cert-manager makes that Secret unless it is the user's own: a
    // certificate for both usages, naming the server name io-engine-ctl
    // checks, from a CA issuer (ca.crt: the CA the clients' certificates
    // come from) that a self-signed one made.
    let certificates: Vec<&Value> = docs.iter().filter(|d| d["kind"] == "Certificate").collect();
    if secret == "engine-grpc-tls" {
        assert!(certificates.is_empty(), "{what}: the user's own Secret");
    } else {
        let engine = certificates
            .iter()
            .find(|d| d["spec"]["secretName"] == secret)
            .unwrap_or_else(|| panic!("{what}: no Certificate makes {secret}"));
        for usage in ["server auth", "client auth"] {
            assert!(
                engine["spec"]["usages"]
                    .as_array()
                    .is_some_and(|u| u.iter().any(|x| x == usage)),
                "{what}: {usage}"
            );
        }
        let server_name = value("IO_ENGINE_TLS_SERVER_NAME").expect("a server name");
        assert!(
            engine["spec"]["dnsNames"]
                .as_array()
                .is_some_and(|n| n.iter().any(|x| x == server_name)),
            "{what}: {server_name} in {}",
            engine["spec"]["dnsNames"]
        );
        let issuer = &engine["spec"]["issuerRef"];
        assert_eq!(issuer["kind"], "Issuer", "{what}");
        let ca_issuer = docs
            .iter()
            .find(|d| d["kind"] == "Issuer" && d["metadata"]["name"] == issuer["name"])
            .unwrap_or_else(|| panic!("{what}: no Issuer {}", issuer["name"]));
        let ca_secret = &ca_issuer["spec"]["ca"]["secretName"];
        let ca = certificates
            .iter()
            .find(|d| &d["spec"]["secretName"] == ca_secret)
            .unwrap_or_else(|| panic!("{what}: no CA Certificate makes {ca_secret}"));
        assert_eq!(ca["spec"]["isCA"], true, "{what}");
        let root = &ca["spec"]["issuerRef"]["name"];
        assert!(
            docs.iter().any(|d| d["kind"] == "Issuer"
                && &d["metadata"]["name"] == root
                && d["spec"]["selfSigned"].is_object()),
            "{what}: the CA's self-signed Issuer {root}"
        );
    }
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
        .filter(|v| matches!(grpc_mode(v), GrpcMode::Tls { .. }))
    {
        renderings.push((
            format!("helm template with {values:?}"),
            yaml_documents(&helm_template(values)),
        ));
    }
    // The kustomization's, the chart's own certificates (with and without
    // client certificates), a Secret of one's own.
    assert_eq!(renderings.len(), 4);
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

/// Copies directory `from` to `to`, recursively.
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("a directory");
    for entry in std::fs::read_dir(from).expect("a directory to copy") {
        let path = entry.expect("an entry").path();
        let target = to.join(path.file_name().expect("a name"));
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).expect("a copy");
        }
    }
}

/// The install notes of the chart with `values` (and the `--api-versions`
/// their comment lines name). `helm template` does not render NOTES.txt,
/// which is the template `io-engine.notes` alone: a copy of the chart
/// renders that template into a ConfigMap.
fn helm_notes(values: &str) -> String {
    let notes = std::fs::read_to_string(workspace_root().join(CHART).join("templates/NOTES.txt"))
        .expect("NOTES.txt");
    assert_eq!(notes.trim(), "{{ include \"io-engine.notes\" . }}");
    let dir = TempDir::new("helm-notes");
    let chart = dir.path().join("io-engine");
    copy_dir(&workspace_root().join(CHART), &chart);
    std::fs::write(
        chart.join("templates/zz-notes.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\n\
         data:\n  notes: {{ include \"io-engine.notes\" . | quote }}\n",
    )
    .expect("the notes' template");
    let out = helm_template_of(
        &chart.display().to_string(),
        values,
        &["--show-only", "templates/zz-notes.yaml"],
    );
    yaml_documents(&out)[0]["data"]["notes"]
        .as_str()
        .expect("the notes")
        .to_owned()
}

#[test]
fn the_notes_say_how_grpc_is_served_and_warn_of_plaintext() {
    const WARNING: &str = "WARNING: gRPC is PLAINTEXT on every node's address, NODE:10124";
    const LOOPBACK: &str = "gRPC: plaintext on each node's loopback only, 127.0.0.1:10124";
    const NO_CERT_MANAGER: &str = "The cluster does not serve cert-manager's API";
    // (values, what the notes must say, what they must not)
    let cases: &[(&str, &[&str], &[&str])] = &[
        ("", &[LOOPBACK, NO_CERT_MANAGER], &[WARNING, "gRPC: TLS"]),
        (
            CERT_MANAGER,
            &[
                "gRPC over TLS :10124.",
                "gRPC: TLS on NODE:10124 with the Secret io-engine-grpc-tls (cert-manager makes it: \
                 Certificate io-engine-grpc-tls, issuer io-engine-ca); clients need a certificate \
                 of its ca.crt (mutual TLS): a cert-manager Certificate in storage with issuerRef \
                 {name: io-engine-ca, kind: Issuer} and usages [client auth].",
                "io-engine-ctl --endpoint https://NODE:10124 --tls-server-name io-engine.storage.svc",
            ],
            &[WARNING, LOOPBACK, NO_CERT_MANAGER],
        ),
        (
            "grpc:\n  insecure: true\n",
            &[WARNING, "gRPC IN PLAINTEXT :10124", "#####"],
            &[LOOPBACK, "gRPC: TLS"],
        ),
        // Explicit plaintext wins over cert-manager's API, loudly.
        (
            "# --api-versions cert-manager.io/v1\ngrpc:\n  insecure: true\n",
            &[WARNING],
            &["gRPC: TLS"],
        ),
        (
            "grpc:\n  tls:\n    enabled: true\n    secretName: engine-grpc-tls\n",
            &["gRPC: TLS on NODE:10124 with the Secret engine-grpc-tls; clients need"],
            &[WARNING, "cert-manager makes it"],
        ),
        (
            "# --api-versions cert-manager.io/v1\ngrpc:\n  tls: {enabled: false}\n",
            &[LOOPBACK],
            &[WARNING, NO_CERT_MANAGER, "gRPC: TLS"],
        ),
        (
            "hugepages: 0\nresources: {memory: 3Gi}\n",
            &["hugepages: 0: no hugepages", "(resources.memory: 3Gi)"],
            &[WARNING],
        ),
    ];
    for (values, says, not) in cases {
        let notes = helm_notes(values);
        for s in *says {
            assert!(notes.contains(s), "{values:?}: {s:?} not in:\n{notes}");
        }
        for s in *not {
            assert!(!notes.contains(s), "{values:?}: {s:?} in:\n{notes}");
        }
    }
}

#[test]
fn the_notes_attach_each_share_as_the_real_daemon_shares_it() {
    let notes = helm_notes(SHARES_VALUES);
    // Per protocol: an NBD URI (and fio on it), or `nvme connect` with the
    // share's subsystem NQN (the default one, or its own), on the node's
    // address and the chart's ports; never a DH-HMAC-CHAP secret.
    for line in [
        "metrics :9502/metrics, NBD :10810, NVMe/TCP :4421.",
        "  m0: NBD, nbd://NODE:10810/m0\n",
        "--ioengine=nbd --uri=nbd://NODE:10810/m0 ",
        "  m1: NVMe/TCP\n    nvme connect -t tcp -a NODE -s 4421 -n nqn.2024-12.io.io-engine:m1\n",
        "  m2: NBD, read-only, nbd://NODE:10810/m2\n",
        "  m3: NVMe/TCP, read-only, its allowed hosts only (--hostnqn and the host's \
         --dhchap-secret)\n    nvme connect -t tcp -a NODE -s 4421 -n nqn.2019-05.io.example:pvc-1\n",
    ] {
        assert!(notes.contains(line), "{line:?} not in:\n{notes}");
    }
    assert!(
        !notes.contains("DHHC") && !notes.contains("hEnUU"),
        "{notes}"
    );
    // The old notes' mistake: an nbd:// URI for an NVMe/TCP share.
    assert!(!notes.contains("nbd://NODE:10810/m1"), "{notes}");

    // The real daemon, started with the rendered config, shares each
    // device over the protocol and NQN the notes print.
    let docs = yaml_documents(&helm_template(SHARES_VALUES));
    let dir = TempDir::new("deploy-shares");
    let file = dir.write("io-engine.toml", &config_toml(&docs, "shares"));
    let cpu = available_cpus()[0].to_string();
    let d = Daemon::start([
        "--config",
        &file.display().to_string(),
        "-l",
        &cpu,
        "--poll-mode",
        "adaptive",
    ]);
    let out = d.ctl(["--output", "json", "export", "list"]);
    assert!(out.status.success(), "{}", said(&out));
    let list: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let exports = list["exports"].as_array().expect("exports");
    assert_eq!(exports.len(), 4, "{list}");
    for e in exports {
        let name = e["bdev"].as_str().expect("a name");
        let ro = if e["read_only"] == true {
            ", read-only"
        } else {
            ""
        };
        // The share's line in the notes, and the attach line below it.
        let (head, attach) = match e["protocol"].as_str() {
            Some("nvmf") => (
                format!("  {name}: NVMe/TCP{ro}"),
                format!(
                    "    nvme connect -t tcp -a NODE -s 4421 -n {}",
                    e["nqn"].as_str().expect("an NQN")
                ),
            ),
            Some("nbd") => (
                format!("  {name}: NBD{ro}, nbd://NODE:10810/{name}"),
                format!("    fio --name=check --ioengine=nbd --uri=nbd://NODE:10810/{name} "),
            ),
            other => panic!("{name}: protocol {other:?}"),
        };
        let lines: Vec<&str> = notes.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with(&head) && !l[head.len()..].starts_with(", read-only"))
            .unwrap_or_else(|| panic!("{head:?} not in:\n{notes}"));
        assert!(
            lines.get(at + 1).is_some_and(|l| l.starts_with(&attach)),
            "{name}: {attach:?} after {head:?} in:\n{notes}"
        );
    }
}
