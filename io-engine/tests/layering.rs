//! The layering rule, enforced: a layer of the library imports only the
//! layers below it, and the files of one layer do not import each other in
//! a cycle.
//!
//! The layers and their order are the ones `src/lib.rs` states in its doc
//! comment ("Layers, lowest first: `env` < `pool` < ..."; layers named
//! together with a comma share a rank and import neither each other). The
//! test reads the library's sources as text: every `crate::LAYER` path in
//! code outside tests (`use` lines and paths written inline alike) is an
//! import of `LAYER`; within a layer, `use super::`, `use self::` and
//! `use crate::` paths are resolved through the facades' `pub use` lines
//! to the file that defines the item, and those file-to-file edges must
//! form no cycle; every `mod.rs` is a facade (`mod` and `use` lines
//! under its doc comment); and the export registry's files (those directly
//! in `export/`) import no protocol's folder (`export/nbd/`,
//! `export/nvmf/`): what a protocol adds to a share is its own. Files that only tests compile (`#[cfg(test)] mod x;`, a
//! `tests.rs`, a trailing `#[cfg(test)] mod tests { .. }`) are left out.
//!
//! `cargo test -p io-engine --test layering -- --nocapture import_table`
//! prints the table of which layer imports what (docs/architecture.md
//! shows it).
//!
//! Thread: the test harness's.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// A source file of the library: where it sits and its code outside tests.
struct Source {
    /// Path below `src/`, e.g. `bdev/registry.rs`.
    rel: String,
    /// Module path, e.g. `["bdev", "registry"]` (`mod.rs` names its folder).
    module: Vec<String>,
    /// Its code, with comments and test-only parts removed.
    code: String,
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The layers in rank order, each rank a set of layer names, from the
/// "Layers, lowest first:" sentence of `lib.rs`'s doc comment.
fn layers() -> Vec<Vec<String>> {
    let lib = fs::read_to_string(src_dir().join("lib.rs")).expect("lib.rs");
    let doc: String = lib
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("//!"))
        .map(|l| format!("{} ", l.trim()))
        .collect();
    let start = doc
        .find("Layers, lowest first:")
        .expect("lib.rs's doc comment states the layers (\"Layers, lowest first: ...\")");
    let rest = &doc[start + "Layers, lowest first:".len()..];
    let sentence = &rest[..rest
        .find('.')
        .expect("the layer sentence ends with a period")];
    sentence
        .split('<')
        .map(|rank| {
            rank.split(',')
                .map(|n| n.trim().trim_matches('`').to_string())
                .filter(|n| !n.is_empty())
                .collect::<Vec<_>>()
        })
        .filter(|r| !r.is_empty())
        .collect()
}

/// Removes `//` comments (doc comments too) and string literal contents,
/// keeping line structure, so that paths in prose or strings are not read
/// as imports.
fn strip_comments_and_strings(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let mut i = 0;
    let mut block = 0usize;
    while i < b.len() {
        if block > 0 {
            if b[i..].starts_with(b"*/") {
                block -= 1;
                i += 2;
            } else if b[i..].starts_with(b"/*") {
                block += 1;
                i += 2;
            } else {
                if b[i] == b'\n' {
                    out.push('\n');
                }
                i += 1;
            }
            continue;
        }
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if b[i..].starts_with(b"/*") {
            block += 1;
            i += 2;
            continue;
        }
        // A raw string r"..." or r#"..."#.
        if b[i] == b'r' && (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#')) {
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) == Some(&b'"') && (i == 0 || !is_ident(b[i - 1])) {
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                j += 1;
                while j < b.len() && !b[j..].starts_with(&close) {
                    if b[j] == b'\n' {
                        out.push('\n');
                    }
                    j += 1;
                }
                out.push_str("\"\"");
                i = j + close.len();
                continue;
            }
        }
        if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                if b[j] == b'\\' {
                    j += 1;
                }
                if b.get(j) == Some(&b'\n') {
                    out.push('\n');
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j + 1;
            continue;
        }
        // A char literal ('x', '\n', '"'), not a lifetime ('a).
        if b[i] == b'\'' {
            let lit = if b.get(i + 1) == Some(&b'\\') {
                b[i + 2..]
                    .iter()
                    .position(|&c| c == b'\'')
                    .map(|p| i + 2 + p)
            } else if b.get(i + 2) == Some(&b'\'') {
                Some(i + 2)
            } else {
                None
            };
            if let Some(end) = lit {
                out.push_str("' '");
                i = end + 1;
                continue;
            }
        }
        out.push(b[i] as char);
        i += 1;
    }
    out
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Cuts a trailing inline test module (`#[cfg(test)]` before `mod NAME {`)
/// and everything after it.
fn without_inline_tests(code: &str) -> String {
    let lines: Vec<&str> = code.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        if l.trim() == "#[cfg(test)]" {
            let next = lines[i + 1..].iter().find(|l| !l.trim().is_empty());
            if next.is_some_and(|n| {
                let n = n.trim();
                (n.starts_with("mod ")
                    || n.starts_with("pub mod ")
                    || n.starts_with("pub(crate) mod "))
                    && n.ends_with('{')
            }) {
                return lines[..i].join("\n");
            }
        }
    }
    code.to_string()
}

/// Child modules a file declares for test builds only (`#[cfg(test)]`
/// or `#[cfg(any(test, ...))]` before `mod NAME;`).
fn test_only_children(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut test_attr = false;
    for l in code.lines() {
        let t = l.trim();
        if t.is_empty() {
            continue;
        }
        if t.starts_with("#[cfg(") {
            // `any(test, feature = ..)` is compiled outside tests too.
            test_attr = t.starts_with("#[cfg(test)]")
                || (t.starts_with("#[cfg(any(test") && !t.contains("feature"));
            continue;
        }
        if t.starts_with("#[") {
            continue;
        }
        if test_attr && let Some(name) = declared_module(t) {
            out.insert(name);
        }
        test_attr = false;
    }
    out
}

/// `NAME` of a `mod NAME;` line (with any visibility).
fn declared_module(line: &str) -> Option<String> {
    let l = line.trim();
    let l = l
        .strip_prefix("pub(crate) ")
        .or_else(|| l.strip_prefix("pub(super) "))
        .or_else(|| l.strip_prefix("pub "))
        .unwrap_or(l);
    let name = l.strip_prefix("mod ")?.strip_suffix(';')?;
    Some(name.trim().to_string())
}

/// Every library source below `src/` except binaries and test-only files.
fn sources() -> Vec<Source> {
    let root = src_dir();
    let mut files = Vec::new();
    walk(&root, &mut files);
    let mut raw: BTreeMap<String, String> = BTreeMap::new();
    for f in files {
        let rel = f
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if rel.starts_with("bin/") || rel == "lib.rs" || rel == "main.rs" {
            continue;
        }
        raw.insert(rel, fs::read_to_string(&f).unwrap());
    }
    // Files that only tests compile: declared under #[cfg(test)] by their
    // parent, named tests.rs, or below such a file's folder.
    let mut test_only: BTreeSet<String> = BTreeSet::new();
    for (rel, text) in &raw {
        let code = strip_comments_and_strings(text);
        let dir = module_dir(rel);
        for child in test_only_children(&code) {
            test_only.insert(format!("{dir}{child}.rs"));
            test_only.insert(format!("{dir}{child}/"));
        }
    }
    raw.into_iter()
        .filter(|(rel, _)| {
            !rel.ends_with("/tests.rs")
                && !rel.contains("/tests/")
                && !test_only
                    .iter()
                    .any(|t| rel == t || (t.ends_with('/') && rel.starts_with(t.as_str())))
        })
        .map(|(rel, text)| {
            let code = without_inline_tests(&strip_comments_and_strings(&text));
            let mut module: Vec<String> = rel
                .trim_end_matches(".rs")
                .split('/')
                .map(String::from)
                .collect();
            if module.last().is_some_and(|m| m == "mod") {
                module.pop();
            }
            Source { rel, module, code }
        })
        .collect()
}

/// The folder (with a trailing `/`) in which a file's child modules live.
fn module_dir(rel: &str) -> String {
    if let Some(dir) = rel.strip_suffix("mod.rs") {
        dir.to_string()
    } else {
        format!("{}/", rel.trim_end_matches(".rs"))
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The layer names a piece of code reaches through `crate::NAME`.
fn crate_refs(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(p) = rest.find("crate::") {
        let before = rest[..p].bytes().last();
        let after = &rest[p + "crate::".len()..];
        if before.is_none_or(|c| !is_ident(c) && c != b':') {
            if let Some(inner) = after.strip_prefix('{') {
                // `use crate::{a::X, b::{Y, Z}}`: the top-level names.
                let mut depth = 0;
                let mut item = String::new();
                for c in inner.chars() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            push_first(&item, &mut out);
                            item.clear();
                            continue;
                        }
                        _ => {}
                    }
                    if depth == 0 {
                        item.push(c);
                    }
                }
                push_first(&item, &mut out);
            } else {
                push_first(after, &mut out);
            }
        }
        rest = &rest[p + "crate::".len()..];
    }
    out
}

fn push_first(path: &str, out: &mut BTreeSet<String>) {
    let name: String = path
        .trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    if !name.is_empty() {
        out.insert(name);
    }
}

/// The complete `use` statements of a piece of code, whitespace folded.
fn use_statements(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(p) = find_use(rest) {
        let stmt = &rest[p..];
        let end = stmt.find(';').unwrap_or(stmt.len());
        out.push(stmt[..end].split_whitespace().collect::<Vec<_>>().join(" "));
        rest = &stmt[end.min(stmt.len())..];
    }
    out
}

/// The offset of the next `use ` keyword at the start of a statement.
fn find_use(code: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(p) = code[from..].find("use ") {
        let at = from + p;
        let before = code[..at].trim_end_matches([' ', '\t']);
        let ok_start = before.is_empty()
            || before.ends_with('\n')
            || before.ends_with(';')
            || before.ends_with('{')
            || before.ends_with('}')
            || before.ends_with(']')
            || before.ends_with("pub")
            || before.ends_with(')');
        if ok_start && (at == 0 || !is_ident(code.as_bytes()[at - 1])) {
            return Some(at + "use ".len());
        }
        from = at + 4;
    }
    None
}

/// Expands one `use` tree (`a::{b, c::{d, e}}`) into its leaf paths.
fn expand(tree: &str) -> Vec<Vec<String>> {
    let tree = tree.trim();
    let tree = tree.split(" as ").next().unwrap_or(tree).trim();
    if let Some(open) = tree.find('{') {
        let prefix: Vec<String> = tree[..open]
            .split("::")
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let mut parts = Vec::new();
        let mut depth = 0;
        let mut item = String::new();
        for c in inner.chars() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(std::mem::take(&mut item));
                    continue;
                }
                _ => {}
            }
            item.push(c);
        }
        parts.push(item);
        parts
            .iter()
            .filter(|p| !p.trim().is_empty())
            .flat_map(|p| {
                expand(p).into_iter().map(|mut rest| {
                    let mut full = prefix.clone();
                    if rest.first().is_some_and(|s| s == "self") {
                        rest.remove(0);
                    }
                    full.extend(rest);
                    full
                })
            })
            .collect()
    } else {
        vec![
            tree.split("::")
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
        ]
    }
}

/// What the library's modules define and re-export, to follow a path to
/// the file that defines its item.
struct Index<'a> {
    /// Module path -> its source.
    files: BTreeMap<Vec<String>, &'a Source>,
    /// Module path -> names it re-exports -> the path they come from
    /// (absolute, from the crate root).
    reexports: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>>,
}

impl<'a> Index<'a> {
    fn new(sources: &'a [Source]) -> Self {
        let files: BTreeMap<_, _> = sources.iter().map(|s| (s.module.clone(), s)).collect();
        let mut reexports: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>> = BTreeMap::new();
        for s in sources {
            let mut rest = s.code.as_str();
            while let Some(p) = rest.find("pub") {
                let after = &rest[p + 3..];
                let after = after
                    .strip_prefix("(crate)")
                    .or_else(|| after.strip_prefix("(super)"))
                    .unwrap_or(after);
                if let Some(stmt) = after.strip_prefix(" use ") {
                    let end = stmt.find(';').unwrap_or(stmt.len());
                    let text = stmt[..end].split_whitespace().collect::<Vec<_>>().join(" ");
                    for path in expand(&text) {
                        let Some(abs) = absolute(&s.module, &path) else {
                            continue;
                        };
                        if let Some(name) = path.last() {
                            let alias = text
                                .split(" as ")
                                .nth(1)
                                .filter(|_| !text.contains('{'))
                                .map(|a| a.trim().to_string())
                                .unwrap_or_else(|| name.clone());
                            reexports
                                .entry(s.module.clone())
                                .or_default()
                                .insert(alias, abs);
                        }
                    }
                }
                rest = &rest[p + 3..];
            }
        }
        Self { files, reexports }
    }

    /// The file that defines what the absolute path names (its longest
    /// prefix that is a module, after following re-exports).
    fn defining_file(&self, path: &[String], depth: usize) -> Option<&'a Source> {
        if depth > 16 {
            return None;
        }
        let mut module: Vec<String> = Vec::new();
        let mut last_file = None;
        for (i, seg) in path.iter().enumerate() {
            let mut next = module.clone();
            next.push(seg.clone());
            if let Some(f) = self.files.get(&next) {
                module = next;
                last_file = Some(*f);
                continue;
            }
            // `seg` is an item of `module`: defined there, or re-exported.
            if let Some(target) = self.reexports.get(&module).and_then(|r| r.get(seg)) {
                let mut full = target.clone();
                full.extend(path[i + 1..].iter().cloned());
                return self.defining_file(&full, depth + 1);
            }
            return last_file;
        }
        last_file
    }
}

/// A `use` path made absolute from the module that writes it: `crate::`,
/// `super::`, `self::` or a child module's name. None for external crates.
fn absolute(module: &[String], path: &[String]) -> Option<Vec<String>> {
    let first = path.first()?;
    let mut base: Vec<String> = module.to_vec();
    let mut rest = path;
    match first.as_str() {
        "crate" => {
            base.clear();
            rest = &path[1..];
        }
        "self" => rest = &path[1..],
        "super" => {
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        _ => {
            // A child module of this one (`use channel::X` in a mod.rs), or
            // an external crate (std, tokio...): the caller checks files.
        }
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The file-to-file import edges within each layer.
fn layer_edges(sources: &[Source]) -> BTreeMap<String, BTreeSet<String>> {
    let index = Index::new(sources);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in sources {
        let layer = &s.module[0];
        let paths: Vec<Vec<String>> = use_statements(&s.code)
            .iter()
            .flat_map(|stmt| expand(stmt))
            .chain(inline_paths(&s.code))
            .collect();
        for path in paths {
            if path.last().is_some_and(|l| l == "*") {
                continue;
            }
            let Some(abs) = absolute(&s.module, &path) else {
                continue;
            };
            if abs.first() != Some(layer) {
                continue;
            }
            let Some(target) = index.defining_file(&abs, 0) else {
                continue;
            };
            if target.rel != s.rel && target.module.len() > 1 {
                edges
                    .entry(s.rel.clone())
                    .or_default()
                    .insert(target.rel.clone());
            }
        }
    }
    edges
}

/// Paths written inline in code (`super::local::with_fds(..)`,
/// `crate::bdev::Bdev`): every `super::` or `crate::` chain of names.
fn inline_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for start in ["super::", "crate::"] {
        let mut from = 0;
        while let Some(p) = code[from..].find(start) {
            let at = from + p;
            from = at + start.len();
            if at > 0 && (is_ident(code.as_bytes()[at - 1]) || code.as_bytes()[at - 1] == b':') {
                continue;
            }
            let chain: Vec<String> = code[at..]
                .split("::")
                .map_while(|seg| {
                    let name: String = seg
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    (!name.is_empty()).then_some((name.len() == seg.len(), name))
                })
                .scan(true, |go_on, (whole, name)| {
                    let keep = *go_on;
                    *go_on = whole;
                    keep.then_some(name)
                })
                .collect();
            if chain.len() > 1 {
                out.push(chain);
            }
        }
    }
    out
}

/// The groups of files that import each other in a cycle: the graph's
/// strongly connected components of more than one file (Tarjan's
/// algorithm), each sorted.
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, n: &'a str) {
            let i = self.index.len();
            self.index.insert(n, i);
            self.low.insert(n, i);
            self.stack.push(n);
            self.on_stack.insert(n);
            for m in self.edges.get(n).into_iter().flatten() {
                let m = m.as_str();
                if !self.index.contains_key(m) {
                    self.visit(m);
                    let low = self.low[n].min(self.low[m]);
                    self.low.insert(n, low);
                } else if self.on_stack.contains(m) {
                    let low = self.low[n].min(self.index[m]);
                    self.low.insert(n, low);
                }
            }
            if self.low[n] == self.index[n] {
                let mut group = Vec::new();
                while let Some(m) = self.stack.pop() {
                    self.on_stack.remove(m);
                    group.push(m.to_string());
                    if m == n {
                        break;
                    }
                }
                if group.len() > 1 {
                    group.sort();
                    self.out.push(group);
                }
            }
        }
    }
    let mut w = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for n in edges.keys() {
        if !w.index.contains_key(n.as_str()) {
            w.visit(n);
        }
    }
    w.out
}

/// Layer -> the layers it imports -> the files that do.
fn layer_imports(sources: &[Source]) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let names: BTreeSet<String> = layers().into_iter().flatten().collect();
    let mut out: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for s in sources {
        let own = &s.module[0];
        for target in crate_refs(&s.code) {
            if &target != own && names.contains(&target) {
                out.entry(own.clone())
                    .or_default()
                    .entry(target)
                    .or_default()
                    .insert(s.rel.clone());
            }
        }
    }
    out
}

#[test]
fn every_library_folder_is_a_layer() {
    let names: BTreeSet<String> = layers().into_iter().flatten().collect();
    for s in sources() {
        assert!(
            names.contains(&s.module[0]),
            "{} is in no layer: name `{}` in lib.rs's \"Layers, lowest first\" sentence",
            s.rel,
            s.module[0]
        );
    }
}

#[test]
fn no_layer_imports_a_layer_above_or_beside_it() {
    let ranks: BTreeMap<String, usize> = layers()
        .into_iter()
        .enumerate()
        .flat_map(|(r, names)| names.into_iter().map(move |n| (n, r)))
        .collect();
    let mut wrong = Vec::new();
    for (layer, targets) in layer_imports(&sources()) {
        for (target, files) in targets {
            if ranks[&target] >= ranks[&layer] {
                wrong.push(format!(
                    "{layer} imports {target} (rank {} >= {}): {files:?}",
                    ranks[&target], ranks[&layer]
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports that go up or sideways:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn no_cycle_between_the_files_of_a_layer() {
    let sources = sources();
    let edges = layer_edges(&sources);
    assert!(
        !edges.is_empty(),
        "no file imports another: the parser is broken"
    );
    let found: Vec<String> = cycles(&edges)
        .into_iter()
        .map(|group| {
            let inner: Vec<String> = group
                .iter()
                .flat_map(|f| {
                    edges[f]
                        .iter()
                        .filter(|t| group.contains(t))
                        .map(move |t| format!("{f} -> {t}"))
                })
                .collect();
            inner.join(", ")
        })
        .collect();
    assert!(
        found.is_empty(),
        "files of one layer that import each other in a cycle:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_export_registry_imports_no_protocol() {
    // `export/*.rs` is what every protocol shares; a protocol's folder
    // (`export/nbd/`, `export/nvmf/`) builds on it, never the reverse.
    let sources = sources();
    let edges = layer_edges(&sources);
    let mut wrong = Vec::new();
    for (from, targets) in &edges {
        let Some(file) = from.strip_prefix("export/") else {
            continue;
        };
        if file.contains('/') || file == "mod.rs" {
            continue;
        }
        for t in targets {
            if t.strip_prefix("export/").is_some_and(|f| f.contains('/')) {
                wrong.push(format!("{from} -> {t}"));
            }
        }
    }
    assert!(
        edges.keys().any(|f| f == "export/exports.rs"),
        "the registry imports nothing: the parser is broken"
    );
    assert!(
        wrong.is_empty(),
        "protocol-independent export files that import a protocol:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_mod_rs_is_a_facade() {
    // A folder's mod.rs says what the folder is for and what it exports;
    // the types and functions live in files named after them. Attributes,
    // outer or inner (the lints a folder denies) and over several lines,
    // are neither.
    let mut wrong = Vec::new();
    for s in sources().iter().filter(|s| s.rel.ends_with("mod.rs")) {
        let mut depth = 0usize;
        let mut attribute = 0usize;
        for line in s.code.lines() {
            let t = line.trim();
            let top = depth == 0;
            depth = (depth + t.matches('{').count()).saturating_sub(t.matches('}').count());
            if attribute > 0 || t.starts_with("#[") || t.starts_with("#![") {
                attribute =
                    (attribute + t.matches('[').count()).saturating_sub(t.matches(']').count());
                continue;
            }
            if !top || t.is_empty() || t.starts_with('}') {
                continue;
            }
            let t = t
                .strip_prefix("pub(crate) ")
                .or_else(|| t.strip_prefix("pub(super) "))
                .or_else(|| t.strip_prefix("pub "))
                .unwrap_or(t);
            if !(t.starts_with("mod ") || t.starts_with("use ")) {
                wrong.push(format!("{}: {}", s.rel, line.trim()));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "mod.rs files that define things:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_parser_sees_what_it_must() {
    // The checks above only prove something if the reader finds imports.
    let refs = crate_refs("use crate::{accel::{A, B}, bdev::C};\nfn f(x: crate::pool::P) {}");
    assert_eq!(refs, ["accel", "bdev", "pool"].map(String::from).into());
    let code =
        strip_comments_and_strings("// crate::x\nlet s = \"crate::y\"; /* crate::z */ crate::w");
    assert_eq!(crate_refs(&code), ["w"].map(String::from).into());
    assert_eq!(
        expand("super::{a::{B, C}, d}"),
        vec![
            vec!["super", "a", "B"]
                .into_iter()
                .map(String::from)
                .collect::<Vec<_>>(),
            vec!["super", "a", "C"]
                .into_iter()
                .map(String::from)
                .collect(),
            vec!["super", "d"].into_iter().map(String::from).collect(),
        ]
    );
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    g.insert("b".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(cycles(&g), vec![vec!["a".to_string(), "b".to_string()]]);
    g.remove("b");
    assert!(cycles(&g).is_empty());
}

/// Prints the layer import table (run with `--nocapture`).
#[test]
fn import_table() {
    let sources = sources();
    let imports = layer_imports(&sources);
    println!("| layer | imports |");
    println!("|---|---|");
    for rank in layers() {
        for layer in rank {
            let targets = imports
                .get(&layer)
                .map(|t| t.keys().cloned().collect::<Vec<_>>().join(", "));
            println!(
                "| {layer} | {} |",
                targets.unwrap_or_else(|| "nothing".into())
            );
        }
    }
}
