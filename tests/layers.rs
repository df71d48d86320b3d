//! The crate's layers, checked from its source: the core's top-level modules import one another
//! without a cycle, `error` imports nothing of the crate but `text`, no core file names the
//! binding, and the binding's own modules (`src/napi/`) import one another without a cycle, nor
//! do its files (a file's `super::x` is its sibling `x.rs`; items of a `mod.rs` are not files).
//! (An import is any `crate::…` path, in a `use` line or inline, tests included.)

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, as (path relative to `src/`, text).
fn sources(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            sources(root, &path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            let relative = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            out.push((relative, fs::read_to_string(&path).unwrap()));
        }
    }
}

fn src() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    sources(&root, &root, &mut out);
    assert!(out.len() > 20, "found the sources ({} files)", out.len());
    out
}

/// The text without its comments (`//` to the end of a line), so that prose naming a module is
/// not taken for an import.
fn code(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn identifier_after(text: &str) -> Option<&str> {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    (end > 0).then(|| &text[..end])
}

/// The names that follow `prefix` in `text`, including those of a grouped import
/// (`crate::{a, b::c}` gives `a` and `b`).
fn paths_after(text: &str, prefix: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().last();
        rest = &rest[at + prefix.len()..];
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue; // `xcrate::`, not `crate::`
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => item_start = true,
                    c if item_start && depth == 1 && !c.is_whitespace() => {
                        item_start = false;
                        if let Some(name) = identifier_after(&group[i..]) {
                            found.insert(name.to_owned());
                        }
                    }
                    _ => {}
                }
            }
        } else if let Some(name) = identifier_after(rest) {
            found.insert(name.to_owned());
        }
    }
    found
}

/// The top-level module a file belongs to (`calendar/local.rs` → `calendar`), and for files of
/// `src/napi/`, the binding's module (`napi/keyed/entry.rs` → `keyed`).
fn module_of(path: &str) -> (String, Option<String>) {
    let mut parts = path.trim_end_matches(".rs").split('/');
    let top = parts.next().unwrap().to_owned();
    let inner = parts.next().map(str::to_owned);
    (top, inner)
}

/// A cycle in `graph`, if there is one (as the modules along it).
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|seen| seen == node) {
            let mut found = path[at..].to_vec();
            found.push(node.to_owned());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

fn core_graph(files: &[(String, String)]) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in files {
        let (top, _) = module_of(path);
        if top == "napi" || top == "lib" {
            continue;
        }
        let imports = graph.entry(top.clone()).or_default();
        for name in paths_after(&code(text), "crate::") {
            if name != top {
                imports.insert(name);
            }
        }
    }
    graph
}

fn binding_graph(files: &[(String, String)]) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in files {
        let (top, inner) = module_of(path);
        let Some(module) = inner.filter(|_| top == "napi") else {
            continue;
        };
        if module == "mod" {
            continue; // the list of modules
        }
        let text = code(text);
        let mut names = paths_after(&text, "crate::napi::");
        // In `src/napi/x.rs`, `super::` is the binding; in `src/napi/keyed/…`, it is `keyed`.
        if path.matches('/').count() == 1 {
            names.extend(paths_after(&text, "super::"));
        }
        let imports = graph.entry(module.clone()).or_default();
        imports.extend(names.into_iter().filter(|name| *name != module));
    }
    graph
}

/// The binding's files (`napi/keyed/entry.rs` …, without the `mod.rs` files, which list the
/// modules and hold shared items) and the sibling or binding files each names.
fn binding_file_graph(files: &[(String, String)]) -> BTreeMap<String, BTreeSet<String>> {
    let paths: BTreeSet<&str> = files.iter().map(|(path, _)| path.as_str()).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in files {
        if !path.starts_with("napi/") || path.ends_with("/mod.rs") {
            continue;
        }
        let dir = &path[..path.rfind('/').unwrap()];
        let text = code(text);
        let mut named = BTreeSet::new();
        for name in paths_after(&text, "super::") {
            named.insert(format!("{dir}/{name}.rs"));
        }
        for name in paths_after(&text, "crate::napi::") {
            named.insert(format!("napi/{name}.rs"));
        }
        // `crate::napi::a::b…`: the file `napi/a/b.rs` when there is one.
        let mut rest = text.as_str();
        while let Some(at) = rest.find("crate::napi::") {
            rest = &rest[at + "crate::napi::".len()..];
            if let Some(first) = identifier_after(rest) {
                if let Some(second) = rest[first.len()..]
                    .strip_prefix("::")
                    .and_then(identifier_after)
                {
                    named.insert(format!("napi/{first}/{second}.rs"));
                }
            }
        }
        let imports = graph.entry(path.clone()).or_default();
        imports.extend(
            named
                .into_iter()
                .filter(|file| file != path && paths.contains(file.as_str())),
        );
    }
    graph
}

#[test]
fn the_bindings_files_import_one_another_without_a_cycle() {
    let graph = binding_file_graph(&src());
    assert!(
        graph.contains_key("napi/keyed/entry.rs") && graph.contains_key("napi/keyed/create.rs")
    );
    assert_eq!(cycle(&graph), None, "the binding's files: {graph:#?}");
}

#[test]
fn the_cores_modules_import_one_another_without_a_cycle() {
    let graph = core_graph(&src());
    assert!(graph.contains_key("limiter") && graph.contains_key("keyed"));
    assert_eq!(cycle(&graph), None, "the core's imports: {graph:#?}");
}

#[test]
fn error_imports_nothing_of_the_crate_but_its_message_formatting() {
    let graph = core_graph(&src());
    let imports: Vec<_> = graph["error"].iter().collect();
    assert_eq!(imports, ["text"], "error imports {imports:?}");
    assert!(
        graph["text"].is_empty(),
        "text is a leaf: {:?}",
        graph["text"]
    );
}

#[test]
fn no_core_file_names_the_binding() {
    for (path, text) in src() {
        let (top, _) = module_of(&path);
        if top == "napi" || top == "lib" {
            continue;
        }
        let text = code(&text);
        for binding in [
            "crate::napi",
            "napi::",
            "napi_derive",
            "#[napi",
            "QuotaClockError",
        ] {
            assert!(
                !text.contains(binding),
                "src/{path} names the binding ({binding})"
            );
        }
    }
}

#[test]
fn the_bindings_modules_import_one_another_without_a_cycle() {
    let graph = binding_graph(&src());
    assert!(graph.contains_key("consume") && graph.contains_key("registry"));
    assert_eq!(cycle(&graph), None, "the binding's imports: {graph:#?}");
}

#[test]
fn the_checks_see_a_cycle_and_a_grouped_import() {
    let files = vec![
        ("a.rs".to_owned(), "use crate::{b::X, c};".to_owned()),
        (
            "b.rs".to_owned(),
            "fn f() { crate::a::g() } // crate::c".to_owned(),
        ),
        ("c.rs".to_owned(), String::new()),
    ];
    let graph = core_graph(&files);
    assert_eq!(
        graph["a"].iter().collect::<Vec<_>>(),
        ["b", "c"],
        "{graph:?}"
    );
    assert_eq!(
        graph["b"].iter().collect::<Vec<_>>(),
        ["a"],
        "a comment is no import"
    );
    assert!(cycle(&graph).is_some());
    let files = vec![
        ("napi/x.rs".to_owned(), "use super::y::Y;".to_owned()),
        (
            "napi/keyed/mod.rs".to_owned(),
            "use super::entry; use crate::napi::x;".to_owned(),
        ),
        (
            "napi/y.rs".to_owned(),
            "use crate::napi::keyed::K;".to_owned(),
        ),
    ];
    let graph = binding_graph(&files);
    assert_eq!(
        graph["keyed"].iter().collect::<Vec<_>>(),
        ["x"],
        "{graph:?}"
    );
    assert!(cycle(&graph).is_some(), "x → y → keyed → x");
    let files = vec![
        (
            "napi/keyed/a.rs".to_owned(),
            "use super::b::B; use super::KeyedState;".to_owned(),
        ),
        (
            "napi/keyed/b.rs".to_owned(),
            "fn f() { crate::napi::keyed::a::g() }".to_owned(),
        ),
        ("napi/keyed/mod.rs".to_owned(), "mod a; mod b;".to_owned()),
    ];
    let graph = binding_file_graph(&files);
    assert_eq!(
        graph["napi/keyed/a.rs"].iter().collect::<Vec<_>>(),
        ["napi/keyed/b.rs"],
        "{graph:?}"
    );
    assert!(cycle(&graph).is_some(), "a → b → a");
}

/// The module path of each core file (`keyed/share.rs` → `keyed::share`, `keyed/mod.rs` →
/// `keyed`, `lib.rs` → the crate), a `#[path = "f.rs"] mod m;` declaration giving the file `f.rs`
/// beside its declaring file the declarer's path plus `m`.
fn module_paths(files: &[(String, String)]) -> BTreeMap<String, Vec<String>> {
    let mut paths = BTreeMap::new();
    for (path, _) in files {
        let mut segments: Vec<String> = path
            .trim_end_matches(".rs")
            .split('/')
            .map(str::to_owned)
            .collect();
        if matches!(segments.last().map(String::as_str), Some("mod" | "lib")) {
            segments.pop();
        }
        paths.insert(path.clone(), segments);
    }
    for (path, text) in files {
        let dir = path.rfind('/').map_or("", |at| &path[..=at]);
        let mut rest = text.as_str();
        while let Some(at) = rest.find("#[path = \"") {
            rest = &rest[at + "#[path = \"".len()..];
            let Some(end) = rest.find('"') else { break };
            let file = format!("{dir}{}", &rest[..end]);
            let after = rest[end..].trim_start_matches(['"', ']']);
            let name = after
                .trim_start()
                .strip_prefix("mod ")
                .and_then(|text| identifier_after(text.trim_start()));
            if let (Some(name), Some(declarer)) = (name, paths.get(path).cloned()) {
                let mut segments = declarer;
                segments.push(name.to_owned());
                paths.insert(file, segments);
            }
        }
    }
    paths
}

/// The paths in `text` that start with `crate::`, `super::` or `self::`, as their segments
/// (`use super::{a::B, c}` gives `super a B` and `super c`).
fn module_references(text: &str) -> Vec<Vec<String>> {
    fn path_at(text: &str, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
        let mut segments = prefix;
        let mut rest = text;
        loop {
            rest = rest.trim_start();
            if let Some(group) = rest.strip_prefix('{') {
                let mut depth = 1;
                let mut start = 0;
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' | ',' if depth == 1 => {
                            path_at(&group[start..i], segments.clone(), out);
                            start = i + 1;
                            if c == '}' {
                                break;
                            }
                        }
                        '}' => depth -= 1,
                        _ => {}
                    }
                }
                return;
            }
            let Some(name) = identifier_after(rest) else {
                break;
            };
            segments.push(name.to_owned());
            rest = &rest[name.len()..];
            match rest.strip_prefix("::") {
                Some(after) => rest = after,
                None => break,
            }
        }
        out.push(segments);
    }
    let mut found = Vec::new();
    for prefix in ["crate::", "super::", "self::"] {
        for (at, _) in text.match_indices(prefix) {
            let before = text[..at].chars().last();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                continue; // `xcrate::`, or a `super::` inside a longer path
            }
            path_at(&text[at..], Vec::new(), &mut found);
        }
    }
    found
}

/// The core's files (`src/napi/` aside) and the files each names through `crate::`, `super::`
/// and `self::` paths, tests included. A file names the file of the longest module its path
/// goes through; a module's own file naming its parts (a `mod.rs` or `lib.rs` its children, a
/// file its test module) lists them, and is no import.
fn core_file_graph(files: &[(String, String)]) -> BTreeMap<String, BTreeSet<String>> {
    let files: Vec<&(String, String)> = files
        .iter()
        .filter(|(path, _)| !path.starts_with("napi/"))
        .collect();
    let owned: Vec<(String, String)> = files.iter().map(|&f| f.clone()).collect();
    let paths = module_paths(&owned);
    let file_of: BTreeMap<&Vec<String>, &String> =
        paths.iter().map(|(file, module)| (module, file)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in &owned {
        let own = &paths[path];
        let imports = graph.entry(path.clone()).or_default();
        for reference in module_references(&code(text)) {
            let mut module: Vec<String> = Vec::new();
            let mut segments = reference.iter().peekable();
            match segments.peek().map(|s| s.as_str()) {
                Some("crate") => {
                    segments.next();
                }
                Some("self") => {
                    segments.next();
                    module = own.clone();
                }
                _ => module = own.clone(),
            }
            while segments.peek().is_some_and(|s| *s == "super") {
                segments.next();
                module.pop();
            }
            module.extend(segments.cloned());
            let named = (0..=module.len())
                .rev()
                .find_map(|len| file_of.get(&module[..len].to_vec()).copied());
            let Some(named) = named else { continue };
            let part = paths[named].starts_with(own) && named != path;
            if named != path && !part {
                imports.insert(named.clone());
            }
        }
    }
    graph
}

#[test]
fn the_cores_files_import_one_another_without_a_cycle() {
    let graph = core_file_graph(&src());
    assert!(graph.contains_key("kernel.rs") && graph.contains_key("keyed/mod.rs"));
    assert_eq!(cycle(&graph), None, "the core's files: {graph:#?}");
}

/// The kernel bar: no file of `src/` has more than this many lines before its tests.
const LINES_BEFORE_TESTS_AT_MOST: usize = 700;

/// The lines of a file before its tests: those before a `#[cfg(test)]` that opens a module, all
/// of them for a file that is itself a test module (`tests.rs`, `*_tests.rs`, under `tests/`).
fn lines_before_tests(path: &str, text: &str) -> usize {
    let name = path.rsplit('/').next().unwrap_or(path);
    if name == "tests.rs" || name.ends_with("_tests.rs") || path.contains("/tests/") {
        return 0;
    }
    let lines: Vec<&str> = text.lines().collect();
    lines
        .iter()
        .enumerate()
        .position(|(at, line)| {
            line.trim() == "#[cfg(test)]"
                && lines[at + 1..]
                    .iter()
                    .map(|line| line.trim())
                    .find(|line| !line.starts_with("#["))
                    .is_some_and(|line| line.contains("mod "))
        })
        .unwrap_or(lines.len())
}

#[test]
fn no_file_has_more_than_700_lines_before_its_tests() {
    let over: Vec<(String, usize)> = src()
        .into_iter()
        .map(|(path, text)| {
            let lines = lines_before_tests(&path, &text);
            (path, lines)
        })
        .filter(|(_, lines)| *lines > LINES_BEFORE_TESTS_AT_MOST)
        .collect();
    assert!(
        over.is_empty(),
        "over {LINES_BEFORE_TESTS_AT_MOST} lines before the tests: {over:?}"
    );
}

#[test]
fn the_file_checks_see_super_paths_a_cycle_and_the_length() {
    let files =
        vec![
        ("lib.rs".to_owned(), "mod k; pub use k::a::A;".to_owned()),
        ("k/mod.rs".to_owned(), "mod a; mod b; use a::A;".to_owned()),
        (
            "k/a.rs".to_owned(),
            "use super::{b::B, Top}; fn f() {}\n#[cfg(test)]\n#[path = \"a_tests.rs\"]\nmod tests;"
                .to_owned(),
        ),
        ("k/a_tests.rs".to_owned(), "use super::f; use crate::k::b::g;".to_owned()),
        ("k/b.rs".to_owned(), "fn g() { crate::k::a::f() }".to_owned()),
        ("k/c.rs".to_owned(), "use super::super::k::b;".to_owned()),
    ];
    let graph = core_file_graph(&files);
    assert_eq!(
        graph["k/a.rs"].iter().collect::<Vec<_>>(),
        ["k/b.rs", "k/mod.rs"],
        "a grouped `super::` path; its test module is a part of it: {graph:?}"
    );
    assert_eq!(
        graph["k/a_tests.rs"].iter().collect::<Vec<_>>(),
        ["k/a.rs", "k/b.rs"]
    );
    assert!(
        graph["k/mod.rs"].is_empty() && graph["lib.rs"].is_empty(),
        "parts: {graph:?}"
    );
    assert_eq!(graph["k/c.rs"].iter().collect::<Vec<_>>(), ["k/b.rs"]);
    assert_eq!(
        cycle(&graph),
        Some(vec![
            "k/a.rs".to_owned(),
            "k/b.rs".to_owned(),
            "k/a.rs".to_owned()
        ])
    );
    let long = "fn f() {}\n".repeat(LINES_BEFORE_TESTS_AT_MOST + 1);
    assert_eq!(
        lines_before_tests("k/a.rs", &long),
        LINES_BEFORE_TESTS_AT_MOST + 1
    );
    let tested = format!("fn f() {{}}\n#[cfg(test)]\nmod tests {{\n{long}}}\n");
    assert_eq!(lines_before_tests("k/a.rs", &tested), 1);
    assert_eq!(lines_before_tests("k/a_tests.rs", &long), 0);
}
