//! The daemon's `--config FILE` with the real binary: devices, shares and
//! flags from a TOML file; the precedence flag > environment variable >
//! file, for single values and lists; bad files refused at start with one
//! line naming the file and the key, exit status 2.

use std::path::Path;

use io_engine_tests::available_cpus;
use io_engine_tests::daemon::{Daemon, run_daemon_to_exit};
use io_engine_tests::tools::TempDir;

/// The devices' names, sorted.
fn bdev_names(d: &Daemon) -> Vec<String> {
    let list = d.ctl_json(&["bdev", "list"]);
    let mut names: Vec<String> = list["bdevs"]
        .as_array()
        .expect("a bdevs array")
        .iter()
        .map(|b| b["name"].as_str().expect("a name").to_owned())
        .collect();
    names.sort();
    names
}

/// The exports, as (name, read-only), sorted.
fn exports(d: &Daemon) -> Vec<(String, bool)> {
    let list = d.ctl_json(&["export", "list"]);
    let mut out: Vec<(String, bool)> = list["exports"]
        .as_array()
        .expect("an exports array")
        .iter()
        .map(|e| {
            (
                e["bdev"].as_str().expect("a bdev").to_owned(),
                e["read_only"].as_bool().expect("read_only"),
            )
        })
        .collect();
    out.sort();
    out
}

fn path_arg(path: &Path) -> String {
    path.display().to_string()
}

#[test]
fn the_config_file_creates_devices_shares_them_and_sets_flags() {
    let cpu = available_cpus()[0];
    let dir = TempDir::new("config");
    let file = dir.write(
        "engine.toml",
        &format!(
            "# devices, shares and flags\n\
             core-list = \"{cpu}\"\n\
             poll-mode = \"adaptive\"\n\
             io-pool-cache = 7\n\
             io-pool-size = 4096\n\
             bdev = [\"malloc:///cm0?size_mb=8&blk_size=4096\", \"null:///cn0?size_mb=16\"]\n\
             share = [\"cm0\", \"cn0:ro\"]\n"
        ),
    );
    // No flag but the file (the helper adds only loopback addresses).
    let d = Daemon::start(["--config", &path_arg(&file)]);
    assert_eq!(bdev_names(&d), ["cm0", "cn0"]);
    assert_eq!(
        exports(&d),
        [("cm0".to_string(), false), ("cn0".to_string(), true)]
    );
    let info = d.ctl_json(&["engine", "info"]);
    assert_eq!(info["poll_mode"], "adaptive", "{info}");
    assert_eq!(info["cores"], serde_json::json!([cpu]), "{info}");
    assert_eq!(info["io_pool_cache"], 7, "{info}");
    assert_eq!(info["io_pool_size"], 4096, "{info}");
}

#[test]
fn a_flag_beats_its_variable_which_beats_the_file() {
    let cpu = available_cpus()[0].to_string();
    let dir = TempDir::new("config-precedence");
    let file = dir.write(
        "engine.toml",
        "poll-mode = \"adaptive\"\n\
         io-pool-cache = 7\n\
         bdev = [\"null:///file0?size_mb=8\", \"null:///file1?size_mb=8\"]\n\
         core-list = \"0\"\n",
    );
    let config = path_arg(&file);
    let cache = |d: &Daemon| d.ctl_json(&["engine", "info"])["io_pool_cache"].clone();

    // The file alone.
    let d = Daemon::start(["--config", &config, "-l", &cpu]);
    assert_eq!(cache(&d), 7);
    assert_eq!(bdev_names(&d), ["file0", "file1"]);
    drop(d);

    // The variable beats the file; a list in a variable replaces the file's.
    let env = [
        ("IO_ENGINE_IO_POOL_CACHE", "9"),
        ("IO_ENGINE_BDEV", "null:///env0?size_mb=8"),
    ];
    let d = Daemon::start_with_env(["--config", &config, "-l", &cpu], &env);
    assert_eq!(cache(&d), 9);
    assert_eq!(bdev_names(&d), ["env0"]);
    drop(d);

    // The flag beats both; the file's core-list gives way to -m instead of
    // conflicting with it.
    let mask = io_engine_tests::cpu_mask(&[available_cpus()[0]]);
    let d = Daemon::start_with_env(
        [
            "--config",
            &config,
            "-m",
            &mask,
            "--io-pool-cache",
            "11",
            "--bdev",
            "null:///flag0?size_mb=8",
        ],
        &env,
    );
    assert_eq!(cache(&d), 11);
    assert_eq!(bdev_names(&d), ["flag0"]);
    let info = d.ctl_json(&["engine", "info"]);
    assert_eq!(info["cores"], serde_json::json!([available_cpus()[0]]));
    drop(d);

    // IO_ENGINE_CONFIG names the file as --config does.
    let d = Daemon::start_with_env(["-l", &cpu], &[("IO_ENGINE_CONFIG", &config)]);
    assert_eq!(cache(&d), 7);
    assert_eq!(bdev_names(&d), ["file0", "file1"]);
}

#[test]
fn bad_config_files_exit_2_with_one_line_naming_the_file_and_the_key() {
    let cpu = available_cpus()[0].to_string();
    let dir = TempDir::new("config-bad");
    let missing = dir.path().join("missing.toml");
    let cases: Vec<(&str, Option<&str>, Vec<&str>)> = vec![
        ("missing.toml", None, vec!["cannot read", "No such file"]),
        (
            "unknown.toml",
            Some("poll-mode = \"adaptive\"\nfrobnicate = 3\n"),
            vec!["unknown key `frobnicate`"],
        ),
        (
            "syntax.toml",
            Some("poll-mode = \"adaptive\"\nbdev = [\"null:///x\"\n"),
            vec!["not TOML", "line 2"],
        ),
        (
            "value.toml",
            Some("poll-mode = \"sometimes\"\n"),
            vec!["sometimes", "--poll-mode"],
        ),
        (
            "shape.toml",
            Some("io-pool-cache = [1, 2]\n"),
            vec!["`io-pool-cache`", "expected one value"],
        ),
        (
            "table.toml",
            Some("[nbd]\naddr = \"127.0.0.1:1\"\n"),
            vec!["unknown key `nbd`"],
        ),
        (
            "conflict.toml",
            Some("reactor-mask = \"0x1\"\ncore-list = \"0\"\n"),
            vec!["cannot be used with"],
        ),
        (
            "nested.toml",
            Some("config = \"other.toml\"\n"),
            vec!["`config` cannot be set inside a config file"],
        ),
    ];
    for (name, text, words) in cases {
        let path = match text {
            Some(text) => dir.write(name, text),
            None => missing.clone(),
        };
        let path = path_arg(&path);
        // No core flag: the conflict case must come from the file alone.
        let mut args = vec!["--config", &path, "--grpc-addr", "127.0.0.1:0"];
        if name != "conflict.toml" {
            args.extend(["-l", &cpu]);
        }
        let (out, took) = run_daemon_to_exit(&args, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(took.as_secs() < 5, "{name} took {took:?}");
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{name}: one line, got {stderr:?}");
        let line = lines[0];
        assert!(
            line.starts_with(&format!("io-engine: error: config {path}: ")),
            "{name}: {line}"
        );
        for word in words {
            assert!(line.contains(word), "{name}: {line:?} lacks {word:?}");
        }
    }
}
