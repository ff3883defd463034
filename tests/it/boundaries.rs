//! The import boundaries: every `crate::` path in `src/` (outside test code) stays inside the
//! folder graph below, and ARCHITECTURE.md's "Boundaries" section states the same graph, so
//! the code and the document cannot part.
//!
//! A folder is a top-level module of the library (`src/model/`, `src/daemon.rs`). An import
//! from folder A to folder B is allowed only when B is in A's row. A new folder has to be given
//! a row here and in ARCHITECTURE.md before its first import is accepted.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Which folder may import which, bottom floor first. Each row names every folder the folder
/// may import (not transitively: a row lists what the folder's own code names).
const ALLOWED: &[(&str, &[&str])] = &[
    ("util", &[]),
    ("nvme", &["util"]),
    ("ata", &["util"]),
    ("http", &["util"]),
    ("safety", &["util"]),
    ("model", &["util", "nvme", "ata"]),
    ("engine", &["util", "model", "nvme"]),
    ("config", &["util", "model", "nvme", "engine", "safety"]),
    ("pcie", &["util", "model", "nvme", "config"]),
    ("state", &["util", "model", "safety"]),
    ("stats", &["util", "model", "engine"]),
    (
        "health",
        &["util", "model", "nvme", "ata", "config", "pcie"],
    ),
    ("verdict", &["util", "model", "nvme", "state"]),
    (
        "workload",
        &[
            "util", "model", "nvme", "engine", "safety", "pcie", "state", "stats", "health",
            "verdict",
        ],
    ),
    (
        "report",
        &[
            "util", "model", "nvme", "ata", "state", "health", "workload",
        ],
    ),
    (
        "metrics",
        &[
            "util", "model", "nvme", "ata", "http", "pcie", "state", "stats", "health", "workload",
        ],
    ),
    ("reload", &["util", "model", "config", "state", "workload"]),
    (
        "daemon",
        &[
            "util", "model", "nvme", "http", "safety", "config", "state", "health", "verdict",
            "workload", "report", "metrics", "reload",
        ],
    ),
    (
        "cli",
        &[
            "util", "model", "nvme", "ata", "http", "safety", "config", "state", "health",
            "workload", "report", "reload", "daemon",
        ],
    ),
];

/// Imports against the graph that are known and still to be removed, each with its reason. A
/// listed import that no longer exists fails the test too, so the list only shrinks.
const KNOWN: &[(&str, &str, &str)] = &[];

/// One `crate::` path found in the code.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Import {
    file: String,
    line: usize,
    from: String,
    to: String,
    path: String,
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The module path of a file under `src/`: `model/results.rs` is `[model, results]`,
/// `model/mod.rs` is `[model]`, `lib.rs` is `[]`.
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs").to_string();
        if stem != "mod" && stem != "lib" && stem != "main" {
            parts.push(stem);
        }
    }
    parts
}

/// Blank out what is not code: comments (line, doc and block), string and char literals,
/// keeping the line structure so line numbers stay true.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |out: &mut String, c: u8| out.push(if c == b'\n' { '\n' } else { ' ' });
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
                out.push(' ');
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, b[i]);
                    i += 1;
                }
            }
        } else if c == b'r' && matches!(b.get(i + 1), Some(b'"') | Some(b'#')) && {
            let mut j = i + 1;
            while b.get(j) == Some(&b'#') {
                j += 1;
            }
            let ident = |k: usize| b[k].is_ascii_alphanumeric() || b[k] == b'_';
            // `r"`, `r#"`, and the byte strings `br"`, `br#"`.
            let starts = i == 0 || !ident(i - 1) || (b[i - 1] == b'b' && (i == 1 || !ident(i - 2)));
            b.get(j) == Some(&b'"') && starts
        } {
            let mut hashes = 0;
            i += 1;
            out.push(' ');
            while b[i] == b'#' {
                hashes += 1;
                i += 1;
                out.push(' ');
            }
            i += 1;
            out.push(' ');
            while i < b.len() {
                if b[i] == b'"'
                    && b[i + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&h| h == b'#')
                        .count()
                        == hashes
                {
                    for _ in 0..=hashes {
                        out.push(' ');
                    }
                    i += 1 + hashes;
                    break;
                }
                blank(&mut out, b[i]);
                i += 1;
            }
        } else if c == b'"' {
            out.push(' ');
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    blank(&mut out, b[i]);
                    i += 1;
                }
                if i < b.len() {
                    blank(&mut out, b[i]);
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == b'\'' && b.get(i + 2) == Some(&b'\'') {
            out.push_str("   ");
            i += 3;
        } else if c == b'\'' && b.get(i + 1) == Some(&b'\\') {
            // '\n', '\'', '\u{..}'
            let mut j = i + 2;
            while j < b.len() && b[j] != b'\'' {
                j += 1;
            }
            for _ in i..=j.min(b.len() - 1) {
                out.push(' ');
            }
            i = j + 1;
        } else {
            // Keep multi-byte characters whole.
            let ch = text[i..].chars().next().unwrap_or(' ');
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// `item` without a leading visibility: `pub`, `pub(crate)`, `pub(super)`, `pub(in path)`.
fn without_visibility(item: &str) -> &str {
    let Some(rest) = item.strip_prefix("pub") else {
        return item;
    };
    let rest = rest.trim_start();
    let rest = match rest.strip_prefix('(') {
        Some(inner) => match inner.find(')') {
            Some(close) => &inner[close + 1..],
            None => return item,
        },
        None => rest,
    };
    rest.trim_start()
}

/// `text` with every `#[cfg(test)] mod NAME { ... }` blanked, and the names of test modules
/// declared as files (`#[cfg(test)] mod tests;`).
fn without_tests(code: &str) -> (String, Vec<String>) {
    let mut out = code.to_string();
    let mut files = Vec::new();
    let mut from = 0;
    while let Some(at) = out[from..].find("#[cfg(test)]") {
        let start = from + at;
        let rest = &out[start + "#[cfg(test)]".len()..];
        let trimmed = rest.trim_start();
        let item = without_visibility(trimmed);
        let Some(after_mod) = item.strip_prefix("mod ") else {
            from = start + 1;
            continue;
        };
        let name: String = after_mod
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let tail = after_mod[name.len()..].trim_start();
        if tail.starts_with(';') {
            files.push(name);
            from = start + 1;
            continue;
        }
        // Blank from the attribute to the module's closing brace.
        let open = start + out[start..].find('{').unwrap_or(0);
        let mut depth = 0usize;
        let mut end = out.len();
        for (k, ch) in out[open..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        let blanked: String = out[start..end]
            .chars()
            .map(|c| if c == '\n' { '\n' } else { ' ' })
            .collect();
        out.replace_range(start..end, &blanked);
        from = start + 1;
    }
    (out, files)
}

/// Every `crate::`, `super::` path of `code` that leaves the folder of the module at `module`,
/// with its line. A group (`crate::{a::X, b::Y}`) yields each member.
fn imports_of(file: &str, module: &[String], code: &str) -> Vec<Import> {
    let Some(me) = module.first() else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < line.len() {
            let word_start = i == 0
                || !(bytes[i - 1].is_ascii_alphanumeric()
                    || bytes[i - 1] == b'_'
                    || bytes[i - 1] == b':');
            let rest = &line[i..];
            let (base, len): (Vec<String>, usize) = if word_start && rest.starts_with("crate::") {
                (Vec::new(), "crate::".len())
            } else if word_start && rest.starts_with("super::") {
                let mut base = module.to_vec();
                let mut len = 0;
                while line[i + len..].starts_with("super::") {
                    base.pop();
                    len += "super::".len();
                }
                (base, len)
            } else {
                i += rest.chars().next().map_or(1, char::len_utf8);
                continue;
            };
            let after = &line[i + len..];
            let mut targets = Vec::new();
            if let Some(group) = after.strip_prefix('{') {
                // The first segment of each member of the group.
                let inner = group.split('}').next().unwrap_or("");
                for m in inner.split(',') {
                    let seg: String = m
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !seg.is_empty() {
                        targets.push(seg);
                    }
                }
            } else {
                let seg: String = after
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !seg.is_empty() {
                    targets.push(seg);
                }
            }
            for seg in targets {
                let mut full = base.clone();
                full.push(seg);
                let to = full[0].clone();
                if &to != me && to != "self" {
                    let text: String = line[i..]
                        .chars()
                        .take_while(|c| !c.is_whitespace() && *c != ';' && *c != '(')
                        .collect();
                    found.push(Import {
                        file: file.to_string(),
                        line: n + 1,
                        from: me.clone(),
                        to,
                        path: text,
                    });
                }
            }
            i += len;
        }
    }
    found
}

/// Every import of the library's code that leaves its folder.
fn scan() -> Vec<Import> {
    let root = src_dir();
    let mut files = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read src/").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    files.sort();
    // Files that are test modules (`#[cfg(test)] mod tests;`), by their path.
    let mut test_files = BTreeSet::new();
    let mut cleaned = BTreeMap::new();
    for p in &files {
        let text = std::fs::read_to_string(p).expect("read a source file");
        let (code, tests) = without_tests(&code_only(&text));
        let dir = if p
            .file_name()
            .is_some_and(|n| n == "mod.rs" || n == "lib.rs")
        {
            p.parent().expect("parent").to_path_buf()
        } else {
            p.with_extension("")
        };
        for t in tests {
            test_files.insert(dir.join(format!("{t}.rs")));
            test_files.insert(dir.join(&t).join("mod.rs"));
        }
        cleaned.insert(p.clone(), code);
    }
    let mut all = Vec::new();
    for (p, code) in &cleaned {
        if test_files.contains(p) {
            continue;
        }
        let rel = p.strip_prefix(&root).expect("under src/");
        if rel == Path::new("main.rs") {
            continue; // the binary names the library as `nvsoak::`
        }
        let shown = format!("src/{}", rel.display());
        all.extend(imports_of(&shown, &module_path(rel), code));
    }
    all
}

fn allowed() -> BTreeMap<&'static str, BTreeSet<&'static str>> {
    ALLOWED
        .iter()
        .map(|(k, v)| (*k, v.iter().copied().collect()))
        .collect()
}

#[test]
fn every_import_follows_the_folder_graph() {
    let graph = allowed();
    let imports = scan();
    // The scan itself works: it sees the imports every build depends on.
    assert!(imports.len() > 300, "only {} imports found", imports.len());
    assert!(
        imports.iter().any(|i| i.from == "workload"
            && i.to == "model"
            && i.path.starts_with("crate::model::")),
        "the scan missed workload's imports of model"
    );
    let mut wrong = Vec::new();
    let mut seen_known = BTreeSet::new();
    for i in &imports {
        let Some(row) = graph.get(i.from.as_str()) else {
            wrong.push(format!(
                "{}:{}: folder `{}` has no row in the import graph (tests/it/boundaries.rs and ARCHITECTURE.md's Boundaries)",
                i.file, i.line, i.from
            ));
            continue;
        };
        if !graph.contains_key(i.to.as_str()) {
            wrong.push(format!(
                "{}:{}: `{}` names `{}`, which has no row in the import graph",
                i.file, i.line, i.path, i.to
            ));
        } else if !row.contains(i.to.as_str()) {
            if KNOWN.iter().any(|(a, b, _)| *a == i.from && *b == i.to) {
                seen_known.insert((i.from.clone(), i.to.clone()));
                continue;
            }
            wrong.push(format!(
                "{}:{}: `{}`: {} may not import {} (it may import: {})",
                i.file,
                i.line,
                i.path,
                i.from,
                i.to,
                row.iter().copied().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    for (a, b, why) in KNOWN {
        if !seen_known.contains(&(a.to_string(), b.to_string())) {
            wrong.push(format!(
                "{a} -> {b} is listed as a known exception ({why}) but no longer exists: remove it from KNOWN"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layering:\n{}",
        wrong.join("\n")
    );
}

/// Every folder of `src/` has a row, and the graph has no circle: each row names only folders
/// of earlier rows, so the rows are the floors from the ground up.
#[test]
fn the_graph_is_layered_and_covers_every_folder() {
    let mut earlier: BTreeSet<&str> = BTreeSet::new();
    for (name, row) in ALLOWED {
        for dep in *row {
            assert!(
                earlier.contains(dep),
                "{name} may import {dep}, which is not on a floor below it"
            );
        }
        assert!(earlier.insert(name), "{name} has two rows");
    }
    let mut folders = BTreeSet::new();
    for e in std::fs::read_dir(src_dir()).expect("read src/").flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let name = name.trim_end_matches(".rs").to_string();
        if name != "lib" && name != "main" {
            folders.insert(name);
        }
    }
    let rows: BTreeSet<String> = ALLOWED.iter().map(|(k, _)| k.to_string()).collect();
    assert_eq!(
        folders, rows,
        "the folders of src/ and the rows of the graph differ"
    );
}

/// ARCHITECTURE.md's Boundaries section states the same graph, row for row.
#[test]
fn architecture_md_states_the_same_graph() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md"))
            .expect("read ARCHITECTURE.md");
    let section = doc
        .split("\n## Boundaries")
        .nth(1)
        .expect("ARCHITECTURE.md has a `## Boundaries` section");
    let block = section
        .split("```")
        .nth(1)
        .expect("the Boundaries section has a fenced graph");
    let mut documented = Vec::new();
    for line in block.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        let (name, deps) = line
            .split_once("->")
            .unwrap_or_else(|| panic!("graph line without `->`: {line}"));
        let deps: Vec<String> = deps
            .split(',')
            .map(|d| d.trim().to_string())
            .filter(|d| !d.is_empty() && d != "(nothing)")
            .collect();
        documented.push((name.trim().to_string(), deps));
    }
    let coded: Vec<(String, Vec<String>)> = ALLOWED
        .iter()
        .map(|(k, v)| (k.to_string(), v.iter().map(|d| d.to_string()).collect()))
        .collect();
    assert_eq!(
        documented, coded,
        "ARCHITECTURE.md's Boundaries graph and tests/it/boundaries.rs's ALLOWED differ"
    );
}

/// The scanner reports an import against the graph with its file and line, through `crate::`,
/// `super::` and groups, and not in comments, strings or test modules.
#[test]
fn the_scanner_finds_imports_where_they_are_and_nowhere_else() {
    let code = r##"//! `crate::daemon` in a doc comment
use crate::model::spec::JobSpec;
use crate::{state::save, util};
fn f() { let s = "crate::cli"; let r = r#"crate::cli"#; super::super::report::x(); }
/* crate::metrics */
#[cfg(test)]
mod tests {
    use crate::daemon::Running;
}
"##;
    let module = vec!["model".to_string(), "spec".to_string()];
    let (cleaned, _) = without_tests(&code_only(code));
    let found: Vec<(usize, String)> = imports_of("src/model/spec.rs", &module, &cleaned)
        .into_iter()
        .map(|i| (i.line, i.to))
        .collect();
    assert_eq!(
        found,
        vec![
            (3, "state".to_string()),
            (3, "util".to_string()),
            (4, "report".to_string()),
        ]
    );
    let (_, files) = without_tests(&code_only("#[cfg(test)]\nmod tests;\n"));
    assert_eq!(files, vec!["tests".to_string()]);
    // A test module with any visibility is test code, and so is everything it imports.
    for vis in [
        "pub ",
        "pub(crate) ",
        "pub(super) ",
        "pub(in crate::model) ",
    ] {
        let code =
            format!("#[cfg(test)]\n{vis}mod tests {{\n    use crate::daemon::Running;\n}}\n");
        let (cleaned, _) = without_tests(&code_only(&code));
        assert!(
            imports_of("src/model/spec.rs", &module, &cleaned).is_empty(),
            "{vis}: {cleaned}"
        );
    }
}

/// Where `unsafe` may appear in the library's code (test code aside): a folder (`engine/`) or
/// one file. ARCHITECTURE.md's invariant names the same places.
const UNSAFE_ALLOWED: &[&str] = &[
    "engine/",
    "nvme/ioctl.rs",
    "ata/transport.rs",
    "safety/probe.rs",
    "safety/inuse/loops.rs",
    "safety/mark.rs",
    "workload/worker/alloc_count.rs",
];

/// Every `.rs` file under `src/`: its path relative to `src/` and its full path.
fn rust_files() -> Vec<(String, PathBuf)> {
    let root = src_dir();
    let mut stack = vec![root.clone()];
    let mut files = Vec::new();
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read src/").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p
                    .strip_prefix(&root)
                    .expect("under src/")
                    .to_string_lossy()
                    .into_owned();
                files.push((rel, p));
            }
        }
    }
    files.sort();
    assert!(!files.is_empty(), "no Rust files under src/");
    files
}

#[test]
fn unsafe_lives_only_where_architecture_md_says() {
    let mut found = Vec::new();
    for (rel, p) in rust_files() {
        {
            let text = std::fs::read_to_string(&p).expect("read a source file");
            let (code, _) = without_tests(&code_only(&text));
            // Test modules in their own files are `tests.rs` or under `tests/` by convention.
            if rel.ends_with("/tests.rs") || rel.contains("/tests/") {
                continue;
            }
            for (n, line) in code.lines().enumerate() {
                let has = line
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .any(|w| w == "unsafe");
                if has && !UNSAFE_ALLOWED.iter().any(|a| rel.starts_with(a)) {
                    found.push(format!("src/{rel}:{}", n + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "unsafe outside the places ARCHITECTURE.md allows (move it there, or change both): {found:?}"
    );
}

/// Where a library function may still return `Result<_, String>`: the commands (`cli/`, which
/// use anyhow for context) and the places not yet given typed errors. Entries may be removed
/// once their code is typed; none may be added.
const STRING_ERRORS_ALLOWED: &[&str] = &["cli/"];

/// The error type of every `Result<..>` in `code`, as written: the last top-level argument.
fn result_error_types(code: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let mut from = 0;
        while let Some(at) = line[from..].find("Result<") {
            let start = from + at + "Result<".len();
            let before = line[..from + at].chars().next_back();
            from = start;
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let mut depth = 1usize;
            let mut last_arg = start;
            let mut end = None;
            for (k, ch) in line[start..].char_indices() {
                match ch {
                    '<' | '(' | '[' => depth += 1,
                    '>' | ')' | ']' => {
                        depth -= 1;
                        if depth == 0 {
                            end = Some(start + k);
                            break;
                        }
                    }
                    ',' if depth == 1 => last_arg = start + k + 1,
                    _ => {}
                }
            }
            // A one-argument `Result<T>` (io::Result, anyhow::Result) has its error fixed.
            if let Some(end) = end
                && last_arg != start
            {
                found.push((n + 1, line[last_arg..end].trim().to_string()));
            }
        }
    }
    found
}

#[test]
fn library_errors_are_typed() {
    assert_eq!(
        result_error_types("fn f() -> Result<Vec<(u8, u16)>, String> { g::<io::Result<u8>>() }"),
        vec![(1, "String".to_string())]
    );
    let mut found = Vec::new();
    for (rel, p) in rust_files() {
        {
            if rel.ends_with("/tests.rs")
                || rel.contains("/tests/")
                || STRING_ERRORS_ALLOWED.iter().any(|a| rel.starts_with(a))
            {
                continue;
            }
            let text = std::fs::read_to_string(&p).expect("read a source file");
            let (code, _) = without_tests(&code_only(&text));
            for (line, err) in result_error_types(&code) {
                if err == "String" {
                    found.push(format!("src/{rel}:{line}"));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "Result<_, String> in the library: give it a thiserror type: {found:?}"
    );
}

/// Where the library may open, create or read a file by path itself. Everywhere else goes
/// through these places: reads of what nvsoak is handed through `util::bounded` (a regular
/// file only, opened without blocking, never more than a limit per kind of file), writes of
/// records through `util`'s atomic writer (a new temporary file created exclusively, renamed
/// into place, so a symlink or FIFO in the way is replaced, never followed), the state
/// directory's files beneath its checked descriptor, and the claim and I/O of devices through
/// the descriptor that was checked. Each entry says why it is its own place.
const FILE_ACCESS_ALLOWED: &[(&str, &str)] = &[
    (
        "util/bounded.rs",
        "every read of a file nvsoak is handed: regular, non-blocking, bounded",
    ),
    (
        "util/mod.rs",
        "the atomic writer: a temporary file created exclusively, then renamed",
    ),
    (
        "state/",
        "the state directory: the lock, checkpoint, results and marks beneath its checked descriptor",
    ),
    (
        "safety/",
        "the claims of devices and file targets, checked through the descriptor then written",
    ),
    (
        "engine/",
        "the I/O path of a claimed target, and the kernel's own files for its capabilities",
    ),
    (
        "nvme/",
        "NVMe controller and namespace nodes for admin commands, and sysfs",
    ),
    ("ata/", "SCSI generic nodes for SG_IO, and sysfs"),
    ("pcie/", "sysfs: the PCIe topology, links and AER counters"),
    (
        "util/host.rs",
        "procfs and sysfs: the kernel's own files (hostname, release)",
    ),
    ("util/sched.rs", "procfs: a thread's scheduler statistics"),
    (
        "workload/scheduler/open.rs",
        "a read-only open of a target's path to ask its queue whether it polls",
    ),
    (
        "workload/scheduler/dryrun.rs",
        "check-config's read-only, non-blocking look at a namespace node",
    ),
    (
        "workload/scheduler/recover.rs",
        "/dev/null, to tell a full descriptor table from a missing file",
    ),
    (
        "workload/worker/bench.rs",
        "the benchmark example's scratch file, named on its command line",
    ),
];

/// The calls that open, create or read a file by path.
const FILE_ACCESS_CALLS: &[&str] = &[
    "File::open(",
    "File::create(",
    "OpenOptions::new(",
    "fs::read(",
    "fs::read_to_string(",
    "fs::write(",
];

#[test]
fn files_are_touched_only_through_the_places_that_check_them() {
    let mut found = Vec::new();
    let mut used: BTreeSet<&str> = BTreeSet::new();
    let files = rust_files();
    // Modules declared `#[cfg(test)] mod NAME;` are test code in their own files.
    let mut test_files = BTreeSet::new();
    let mut codes = Vec::new();
    for (rel, p) in &files {
        let text = std::fs::read_to_string(p).expect("read a source file");
        let (code, tests) = without_tests(&code_only(&text));
        let dir = match rel.rsplit_once('/') {
            Some((d, f)) if f == "mod.rs" || f == "lib.rs" => format!("{d}/"),
            Some((d, f)) => format!("{d}/{}/", f.trim_end_matches(".rs")),
            None if rel == "lib.rs" => String::new(),
            None => format!("{}/", rel.trim_end_matches(".rs")),
        };
        for t in tests {
            test_files.insert(format!("{dir}{t}.rs"));
            test_files.insert(format!("{dir}{t}/"));
        }
        codes.push((rel.clone(), code));
    }
    for (rel, code) in codes {
        if rel.ends_with("/tests.rs")
            || rel.contains("/tests/")
            || test_files.iter().any(|t| rel.starts_with(t.as_str()))
        {
            continue;
        }
        for (n, line) in code.lines().enumerate() {
            let Some(call) = FILE_ACCESS_CALLS.iter().find(|c| line.contains(*c)) else {
                continue;
            };
            match FILE_ACCESS_ALLOWED.iter().find(|(a, _)| rel.starts_with(a)) {
                Some((a, _)) => {
                    used.insert(a);
                }
                None => found.push(format!("src/{rel}:{}: {call}", n + 1)),
            }
        }
    }
    assert!(
        found.is_empty(),
        "a file opened or read outside the places that check it (read through util::bounded, \
         write through util::write_file_atomic, or give the place its own entry and reason): {found:#?}"
    );
    let stale: Vec<&str> = FILE_ACCESS_ALLOWED
        .iter()
        .map(|(a, _)| *a)
        .filter(|a| !used.contains(a))
        .collect();
    assert!(
        stale.is_empty(),
        "entries of FILE_ACCESS_ALLOWED that no longer open anything (remove them): {stale:?}"
    );
}
