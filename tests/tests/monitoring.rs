//! The monitoring files, checked by the tools that read them and against
//! real daemons:
//!
//! - the Grafana dashboard: JSON, PromQL that promtool parses, every metric
//!   it queries served by a live daemon; and every panel evaluated, with its
//!   variables expanded as Grafana does, by a real Prometheus that scrapes
//!   two engines (a device of the same name on each, written to) and a dead
//!   target: "Engines up" counts the engines, per-device latency keeps each
//!   engine's series apart, operations without IO give no NaN;
//! - the alert rules (`deploy/prometheus/io-engine-rules.yml`): `promtool
//!   check rules`, `promtool test rules` (each alert firing and not firing),
//!   every metric they name served by a live daemon, and the same
//!   Prometheus raising IoEngineDown for the dead target alone;
//! - the chart's PrometheusRule: the rules file's groups as they are,
//!   rendered where the ServiceMonitor would be (auto, true, false; the
//!   `release` label); the kustomize monitoring overlay's copy of them; the
//!   ServiceMonitors naming the job the rules expect.
//!
//! Every process listens on 127.0.0.1 only and is killed when the test
//! ends, passed or failed; every wait is bounded.

use std::collections::BTreeSet;
use std::process::{Command, Output};

use io_engine_tests::daemon::Daemon;
use io_engine_tests::prometheus::{Prometheus, free_port, run_perf, value};
use io_engine_tests::tools::{
    TempDir, run_ok, run_tool, said, system_tool, tool, yaml_documents, yaml_file,
};
use io_engine_tests::{http, workspace_root};
use serde_json::Value;

const DASHBOARD: &str = "deploy/grafana/io-engine.json";
const CHART: &str = "deploy/helm/io-engine";
/// The rules file plain Prometheus loads (a link to the chart's copy).
const RULES: &str = "deploy/prometheus/io-engine-rules.yml";
/// Their unit tests, for `promtool test rules`.
const RULES_TESTS: &str = "deploy/prometheus/io-engine-rules.test.yml";
/// The job every scrape config and ServiceMonitor gives the engines, and
/// the rules and the dashboard expect.
const JOB: &str = "io-engine";
/// The device each daemon serves and shares, under the same name.
const DEVICE_URI: &str = "malloc:///g0?size_mb=16&blk_size=4096";
/// Metrics the engine serves only in some conditions (the cgroup memory
/// limit: none when unlimited); docs/metrics.md must describe each.
const CONDITIONAL_METRICS: &[&str] = &["io_engine_memory_limit_bytes"];

fn dashboard() -> Value {
    let text = std::fs::read_to_string(workspace_root().join(DASHBOARD)).expect("the dashboard");
    serde_json::from_str(&text).expect("the dashboard is JSON")
}

/// Every PromQL expression of the dashboard's panels (targets), in order.
fn dashboard_exprs(dashboard: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        let title = panel["title"].as_str().unwrap_or("?").to_owned();
        for target in panel["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = target["expr"].as_str() {
                out.push((title.clone(), expr.to_owned()));
            }
        }
    }
    out
}

/// The metric names of the engine (`io_engine_*`, `process_*`) an
/// expression uses.
fn metric_names(expr: &str) -> BTreeSet<String> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|t| t.starts_with("io_engine_") || t.starts_with("process_"))
        .map(str::to_owned)
        .collect()
}

/// The dashboard's variables replaced by values that match everything
/// (for a syntax check, with no Prometheus to ask).
fn with_variables_expanded(expr: &str) -> String {
    expr.replace("$__rate_interval", "1m")
        .replace("$instance", ".*")
        .replace("$bdev", ".*")
        .replace("$job", ".*")
}

/// `promtool ARGS` in the workspace root.
fn promtool(args: &[&str]) -> Output {
    let mut cmd = Command::new(system_tool("promtool", "prometheus"));
    cmd.args(args);
    run_tool(cmd, None)
}

/// The metric names a daemon serves once it has a shared device that did
/// IO (pool series per core appear once a core used the pool).
fn served_metrics() -> BTreeSet<String> {
    let d = Daemon::start_quiet(["--bdev", DEVICE_URI, "--share", "g0"]);
    run_perf(&d, "g0", "randrw", 0.2);
    let body = http::get(&d.metrics_url()).expect("GET /metrics").text();
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_owned)
        .collect()
}

/// Every alerting rule of the rules file: (name, rule).
fn alert_rules() -> Vec<(String, Value)> {
    let docs = yaml_file(RULES);
    assert_eq!(docs.len(), 1, "{RULES}: one document");
    let mut out = Vec::new();
    for group in docs[0]["groups"].as_array().expect("groups") {
        for rule in group["rules"].as_array().expect("rules") {
            let name = rule["alert"].as_str().expect("alerting rules only");
            out.push((name.to_owned(), rule.clone()));
        }
    }
    out
}

#[test]
fn the_dashboard_queries_only_metrics_a_live_daemon_serves() {
    let dashboard = dashboard();
    assert_eq!(dashboard["uid"], "io-engine");
    let exprs = dashboard_exprs(&dashboard);
    let all: String = exprs
        .iter()
        .map(|(_, e)| e.as_str())
        .collect::<Vec<_>>()
        .join("\n");

    // The panels the operators asked for; latency per engine, not merged
    // across engines that have a device of the same name.
    for (what, needle) in [
        ("IOPS per bdev", "rate(io_engine_bdev_ops_total"),
        ("bandwidth per bdev", "rate(io_engine_bdev_bytes_total"),
        (
            "latency quantiles",
            "histogram_quantile(0.99, sum by (instance, node, bdev, op, le) (rate(io_engine_bdev_io_latency_seconds_bucket",
        ),
        (
            "reactor busy %",
            "rate(io_engine_reactor_busy_seconds_total",
        ),
        (
            "pool cache hit rate",
            "rate(io_engine_pool_cache_hits_total",
        ),
        (
            "accel ops per module",
            "sum by (instance, module, opcode) (rate(io_engine_accel_ops_total",
        ),
        ("NBD connections", "io_engine_nbd_connections"),
    ] {
        assert!(all.contains(needle), "no {what} panel ({needle})");
    }

    // PromQL that Prometheus parses: promtool checks each as a recording rule.
    let dir = TempDir::new("dashboard");
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, (_, expr)) in exprs.iter().enumerate() {
        let quoted = serde_json::to_string(&with_variables_expanded(expr)).expect("a string");
        rules.push_str(&format!(
            "      - record: dashboard:expr{i}\n        expr: {quoted}\n"
        ));
    }
    let file = dir.write("rules.yml", &rules);
    let out = promtool(&["check", "rules", &file.display().to_string()]);
    assert!(
        out.status.success(),
        "promtool check rules:\n{}\n{rules}",
        said(&out)
    );

    // Every metric queried is served by a daemon with a shared device that
    // did IO.
    let served = served_metrics();
    let mut queried = BTreeSet::new();
    for (_, expr) in &exprs {
        queried.extend(metric_names(expr));
    }
    assert!(queried.len() >= 15, "{queried:?}");
    let missing: Vec<&String> = queried.iter().filter(|m| !served.contains(*m)).collect();
    assert!(
        missing.is_empty(),
        "the dashboard queries metrics the daemon does not serve: {missing:?}\n\
         served: {served:?}"
    );
    // The template variables' queries too.
    for var in dashboard["templating"]["list"]
        .as_array()
        .expect("variables")
    {
        if let Some(q) = var["definition"].as_str() {
            for m in metric_names(q) {
                assert!(served.contains(&m), "variable {}: {m}", var["name"]);
            }
        }
    }
}

/// Grafana's value of each query variable of the dashboard, asking `prom`
/// as Grafana would: a variable with an `allValue` gets it, the others
/// every value of their `label_values(EXPR, LABEL)` query, as a regex
/// alternation `(a|b)`. `$__rate_interval` is `1m`.
fn grafana_variables(prom: &mut Prometheus, dashboard: &Value) -> Vec<(String, String)> {
    let mut vars = vec![("$__rate_interval".to_owned(), "1m".to_owned())];
    for var in dashboard["templating"]["list"]
        .as_array()
        .expect("variables")
    {
        let Some(definition) = var["definition"].as_str() else {
            continue;
        };
        let name = format!("${}", var["name"].as_str().expect("a name"));
        let value = if let Some(all) = var["allValue"].as_str() {
            all.to_owned()
        } else {
            let args = definition
                .strip_prefix("label_values(")
                .and_then(|a| a.strip_suffix(')'))
                .and_then(|a| a.rsplit_once(','))
                .unwrap_or_else(|| panic!("{name}: not label_values(EXPR, LABEL): {definition}"));
            let (expr, label) = (expand(args.0, &vars), args.1.trim());
            let result =
                prom.query_until(&format!("group by ({label}) ({expr})"), |r| !r.is_empty());
            let values: Vec<String> = result
                .iter()
                .map(|s| regex_escaped(s["metric"][label].as_str().unwrap_or("")))
                .collect();
            format!("({})", values.join("|"))
        };
        vars.push((name, value));
    }
    // `$instance` before `$i`: the longest names first.
    vars.sort_by_key(|(n, _)| std::cmp::Reverse(n.len()));
    vars
}

/// A label value as a regex inside a PromQL string, as Grafana escapes it.
fn regex_escaped(v: &str) -> String {
    v.chars()
        .map(|c| {
            if "\\^$.|?*+()[]{}".contains(c) {
                format!("\\\\{c}")
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// `expr` with the variables `vars` replaced.
fn expand(expr: &str, vars: &[(String, String)]) -> String {
    vars.iter()
        .fold(expr.to_owned(), |e, (name, value)| e.replace(name, value))
}

/// The series of `result` for device g0 and operation `op`: their
/// (instance, node) labels.
fn device_series(result: &[Value], op: &str) -> BTreeSet<(String, String)> {
    let label = |s: &Value, name: &str| s["metric"][name].as_str().unwrap_or("").to_owned();
    result
        .iter()
        .filter(|s| s["metric"]["bdev"] == "g0" && s["metric"]["op"] == op)
        .map(|s| (label(s, "instance"), label(s, "node")))
        .collect()
}

#[test]
fn the_dashboard_and_the_alerts_against_two_engines_and_a_dead_target() {
    let engines = [
        Daemon::start_quiet(["--bdev", DEVICE_URI, "--share", "g0"]),
        Daemon::start_quiet(["--bdev", DEVICE_URI, "--share", "g0"]),
    ];
    // Each target with the `node` label the ServiceMonitor's relabelling
    // gives it; a target nothing answers, in the engines' job (an engine
    // that stopped); Prometheus itself in a job of its own.
    let dead = format!("127.0.0.1:{}", free_port());
    let placed: BTreeSet<(String, String)> = engines
        .iter()
        .enumerate()
        .map(|(i, d)| (d.metrics_addr().to_string(), format!("node{i}")))
        .collect();
    let rules = workspace_root().join(RULES).display().to_string();
    let dir = TempDir::new("monitoring");
    let mut prom = Prometheus::start(dir.path(), |itself| {
        let groups: String = placed
            .iter()
            .chain([&(dead.clone(), "node2".to_owned())])
            .map(|(addr, node)| {
                format!("      - {{targets: ['{addr}'], labels: {{node: {node}}}}}\n")
            })
            .collect();
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n  - {rules}\n\
             scrape_configs:\n\
             \x20 - job_name: {JOB}\n    static_configs:\n{groups}\
             \x20 - job_name: prometheus\n    static_configs:\n      - targets: ['{itself}']\n"
        )
    });
    prom.query_until("up", |r| r.len() == 4);

    // Writes on both engines, then the rates Prometheus sees from them;
    // reads, flushes and the rest stay idle.
    for d in &engines {
        run_perf(d, "g0", "randwrite", 0.3);
    }
    let query = "rate(io_engine_bdev_ops_total{bdev=\"g0\",op=\"write\"}[1m]) > 0";
    prom.query_until(query, |r| r.len() == 2);

    // Every panel, its variables expanded as Grafana does.
    let dashboard = dashboard();
    let vars = grafana_variables(&mut prom, &dashboard);
    let job = vars.iter().find(|(n, _)| n == "$job").expect("$job");
    assert_eq!(job.1, format!("({JOB})"), "All jobs: the engines' only");
    let mut panels: Vec<(String, Vec<Value>)> = Vec::new();
    for (title, expr) in dashboard_exprs(&dashboard) {
        let expr = expand(&expr, &vars);
        let result = prom
            .try_query(&expr)
            .unwrap_or_else(|e| panic!("panel {title:?}: {expr}: {e}"));
        for series in &result {
            let v = series["value"][1].as_str().unwrap_or("");
            assert!(
                !matches!(v, "NaN" | "+Inf" | "-Inf"),
                "panel {title:?} gives {v}: {series}\n{expr}"
            );
        }
        panels.push((title, result));
    }
    let panel = |title: &str| -> Vec<&Vec<Value>> {
        let found: Vec<&Vec<Value>> = panels
            .iter()
            .filter(|(t, _)| t == title)
            .map(|(_, r)| r)
            .collect();
        assert!(!found.is_empty(), "no panel {title:?}");
        found
    };

    // The engines that answer, not every target Prometheus scrapes.
    let up = panel("Engines up")[0];
    assert_eq!(up.len(), 1, "{up:?}");
    assert_eq!(value(&up[0]), 2.0, "Engines up: {up:?}");
    let down = panel("Engines down")[0];
    assert_eq!(value(&down[0]), 1.0, "Engines down: {down:?}");

    // Each engine's latency of g0 on its own (same device name on both),
    // with its node, and nothing for the operations no IO did.
    for title in ["Latency quantiles", "Mean latency", "IOPS per device"] {
        for result in panel(title) {
            assert_eq!(
                device_series(result, "write"),
                placed,
                "{title}: {result:?}"
            );
            assert!(
                result.iter().all(|s| s["metric"]["op"] == "write"),
                "{title}: idle operations show nothing: {result:?}"
            );
            assert!(result.iter().all(|s| value(s) > 0.0), "{title}: {result:?}");
        }
    }

    // The rules, loaded by the same Prometheus: the dead target is down,
    // the engines are not, and nothing else fires or waits to.
    let alerts = prom.query_until("ALERTS", |r| !r.is_empty());
    for alert in &alerts {
        assert_eq!(alert["metric"]["alertname"], "IoEngineDown", "{alerts:?}");
        assert_eq!(alert["metric"]["instance"], dead.as_str(), "{alerts:?}");
        assert_eq!(alert["metric"]["job"], JOB, "{alerts:?}");
    }
}

#[test]
fn promtool_checks_the_alert_rules_and_runs_their_unit_tests() {
    // promtool must reject broken rules and a failing unit test, or its
    // verdicts below would mean nothing.
    let dir = TempDir::new("rules");
    let broken = dir.write(
        "broken.yml",
        "groups:\n  - name: x\n    rules:\n      - alert: X\n        expr: rate(up[5m]\n",
    );
    let out = promtool(&["check", "rules", &broken.display().to_string()]);
    assert!(!out.status.success(), "promtool passed: {}", said(&out));
    let rules = workspace_root().join(RULES).display().to_string();
    let wrong = dir.write(
        "wrong.test.yml",
        &format!(
            "rule_files: ['{rules}']\ntests:\n  - interval: 1m\n    input_series:\n\
             \x20     - series: 'up{{job=\"{JOB}\",instance=\"a:1\"}}'\n        values: '1x10'\n\
             \x20   alert_rule_test:\n      - eval_time: 5m\n        alertname: IoEngineDown\n\
             \x20       exp_alerts: [{{exp_labels: {{severity: critical, job: {JOB}, instance: 'a:1'}}}}]\n"
        ),
    );
    let out = promtool(&["test", "rules", &wrong.display().to_string()]);
    assert!(!out.status.success(), "promtool passed: {}", said(&out));

    let out = promtool(&["check", "rules", RULES]);
    let alerts = alert_rules();
    assert!(
        out.status.success() && said(&out).contains(&format!("SUCCESS: {} rules", alerts.len())),
        "promtool check rules {RULES}:\n{}",
        said(&out)
    );
    let out = promtool(&["test", "rules", RULES_TESTS]);
    assert!(
        out.status.success() && said(&out).contains("SUCCESS"),
        "promtool test rules {RULES_TESTS}:\n{}",
        said(&out)
    );

    // The alerts the issue asks for, each with a severity and runbook text,
    // each unit-tested firing and not firing.
    let names: BTreeSet<&str> = alerts.iter().map(|(n, _)| n.as_str()).collect();
    let wanted: BTreeSet<&str> = [
        "IoEngineDown",
        "IoEngineIoErrors",
        "IoEnginePoolExhausted",
        "IoEngineReactorSaturated",
        "IoEngineMemoryNearLimit",
    ]
    .into();
    assert_eq!(names, wanted);
    let tests = yaml_file(RULES_TESTS);
    let cases: Vec<&Value> = tests[0]["tests"]
        .as_array()
        .expect("tests")
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_array().into_iter().flatten())
        .collect();
    for (name, rule) in &alerts {
        let severity = rule["labels"]["severity"].as_str().unwrap_or("");
        assert!(
            ["critical", "warning"].contains(&severity),
            "{name}: severity {severity:?}"
        );
        for annotation in ["summary", "description"] {
            let text = rule["annotations"][annotation].as_str().unwrap_or("");
            assert!(text.len() > 20, "{name}: {annotation} {text:?}");
        }
        let fires = |c: &Value| c["exp_alerts"].as_array().is_some_and(|a| !a.is_empty());
        let of_this: Vec<&Value> = cases
            .iter()
            .copied()
            .filter(|c| c["alertname"] == *name)
            .collect();
        assert!(
            of_this.iter().any(|c| fires(c)),
            "{name}: no test where it fires"
        );
        assert!(
            of_this.iter().any(|c| !fires(c)),
            "{name}: no test where it stays silent"
        );
    }
}

#[test]
fn every_metric_the_alert_rules_name_is_served_by_a_live_daemon() {
    let mut named = BTreeSet::new();
    for (_, rule) in alert_rules() {
        named.extend(metric_names(rule["expr"].as_str().expect("an expr")));
    }
    assert!(named.len() >= 6, "{named:?}");
    let served = served_metrics();
    let metrics_doc =
        std::fs::read_to_string(workspace_root().join("docs/metrics.md")).expect("docs/metrics.md");
    let missing: Vec<&String> = named
        .iter()
        .filter(|m| !served.contains(*m))
        .filter(|m| !(CONDITIONAL_METRICS.contains(&m.as_str()) && metrics_doc.contains(*m)))
        .collect();
    assert!(
        missing.is_empty(),
        "the alert rules name metrics the daemon does not serve: {missing:?}\n\
         served: {served:?}"
    );
}

/// `helm template` of the chart with `args` (`--set`, `--api-versions`).
fn helm_template(args: &[&str]) -> String {
    let mut cmd = Command::new(tool("helm"));
    cmd.args(["template", "io-engine", CHART, "--namespace", "storage"])
        .args(args);
    run_ok(cmd, None)
}

/// The document of kind `kind` in `yaml`, if there is one.
fn find_kind(yaml: &str, kind: &str) -> Option<Value> {
    yaml_documents(yaml).into_iter().find(|d| d["kind"] == kind)
}

#[test]
fn the_chart_renders_the_rules_file_as_a_prometheus_rule_where_the_operator_is() {
    const OPERATOR: &str = "--api-versions=monitoring.coreos.com/v1";
    let rule = |args: &[&str]| find_kind(&helm_template(args), "PrometheusRule");
    // As the ServiceMonitor: by default only where the cluster serves the
    // operator's API, always when asked, never when refused; the `release`
    // label kube-prometheus-stack selects rules by, when given.
    assert!(rule(&[]).is_none(), "no operator API: no PrometheusRule");
    assert!(rule(&["--set", "prometheusRule.enabled=false", OPERATOR]).is_none());
    let auto = rule(&[OPERATOR]).expect("the operator's API: a PrometheusRule");
    assert!(auto["metadata"]["labels"]["release"].is_null(), "{auto}");
    let asked = rule(&[
        "--set",
        "prometheusRule.enabled=true",
        "--set",
        "prometheusRelease=kps",
        "--set",
        "prometheusRule.labels.team=storage",
    ])
    .expect("a PrometheusRule when asked");
    assert_eq!(asked["metadata"]["labels"]["release"], "kps");
    assert_eq!(asked["metadata"]["labels"]["team"], "storage");

    // The rules of the plain file, exactly; the kustomize monitoring
    // overlay's copy too (kustomize cannot wrap a file into a resource).
    let plain = yaml_file(RULES);
    assert_eq!(
        auto["spec"], plain[0],
        "the PrometheusRule's spec and {RULES}"
    );
    let mut kustomize = Command::new(tool("kubectl"));
    kustomize.args(["kustomize", "deploy/kubernetes/monitoring"]);
    let overlay = find_kind(&run_ok(kustomize, None), "PrometheusRule")
        .expect("the monitoring overlay's PrometheusRule");
    assert_eq!(
        overlay["spec"], plain[0],
        "deploy/kubernetes/components/monitoring/prometheusrule.yaml's spec and {RULES}: \
         regenerate it as its comment says"
    );
    assert_eq!(overlay["metadata"]["namespace"], "io-engine", "{overlay}");

    // The rendering passes yamllint and the chart helm lint; the schema
    // knows the new values.
    let rendered = helm_template(&[OPERATOR]);
    let mut yamllint = Command::new(tool("yamllint"));
    yamllint.args(["--strict", "--format", "parsable", "-"]);
    let out = run_tool(yamllint, Some(rendered.as_bytes()));
    assert!(out.status.success(), "yamllint:\n{}", said(&out));
    let lint = |set: &str| {
        let mut cmd = Command::new(tool("helm"));
        cmd.args(["lint", "--strict", CHART, "--set", set]);
        run_tool(cmd, None)
    };
    let out = lint("prometheusRule.enabled=true");
    assert!(out.status.success(), "helm lint:\n{}", said(&out));
    let out = lint("prometheusRule.enabled=sometimes");
    assert!(!out.status.success(), "helm lint passed enabled=sometimes");

    // The rules name job "io-engine": every scrape config says so, and the
    // ServiceMonitors take it from the Service's label.
    for file in [
        "deploy/prometheus/prometheus.yml",
        "deploy/prometheus/kubernetes.yml",
    ] {
        let config = &yaml_file(file)[0];
        assert_eq!(config["scrape_configs"][0]["job_name"], JOB, "{file}");
        assert_eq!(config["rule_files"][0], "io-engine-rules.yml", "{file}");
    }
    let mut kustomize = Command::new(tool("kubectl"));
    kustomize.args(["kustomize", "deploy/kubernetes/monitoring"]);
    for (what, yaml) in [
        ("helm", helm_template(&[OPERATOR])),
        ("kustomize", run_ok(kustomize, None)),
    ] {
        let monitor = find_kind(&yaml, "ServiceMonitor").expect("a ServiceMonitor");
        let service = find_kind(&yaml, "Service").expect("a Service");
        let label = monitor["spec"]["jobLabel"].as_str().expect("a jobLabel");
        assert_eq!(service["metadata"]["labels"][label], JOB, "{what}");
        let relabel = &monitor["spec"]["endpoints"][0]["relabelings"][0];
        assert_eq!(relabel["targetLabel"], "node", "{what}");
    }
}
