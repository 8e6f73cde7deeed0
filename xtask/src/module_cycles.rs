//! The module-cycle check of `cargo xtask tidy`: the top-level modules of the facade
//! (`crates/ffcv/src`) form no import cycle, so that each file can be read knowing only
//! the files below it (builder → run state → …, never back).
//!
//! A module is a file `NAME.rs` or a folder `NAME/` next to `lib.rs` (a folder's files
//! count as one module: a parent and its children may name each other). A module names
//! another through `crate::other` anywhere outside a comment, including inside
//! `use crate::{…}` groups, or through a type the crate root re-exports
//! (`crate::Batch`, with `pub use batch::{Batch, …};` in `lib.rs`). The scan is textual,
//! which is enough for the facade's plain `use` style and keeps xtask free of a parser.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The source folders checked, relative to the workspace root.
pub const CHECKED: &[&str] = &["crates/ffcv/src"];

/// Module name → the modules it names.
pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// Runs the check on every folder of [`CHECKED`].
pub fn check(root: &Path) -> Result<(), String> {
    for dir in CHECKED {
        let graph = graph_of(&root.join(dir))?;
        if let Some(cycle) = find_cycle(&graph) {
            return Err(format!(
                "{dir}: modules import each other in a cycle: {} (move the shared item \
                 into a module below both, see docs/ARCHITECTURE.md)",
                cycle.join(" -> ")
            ));
        }
    }
    Ok(())
}

/// Reads the modules of the crate whose `lib.rs` is in `src` and what each names.
pub fn graph_of(src: &Path) -> Result<Graph, String> {
    let read = |path: &Path| {
        std::fs::read_to_string(path)
            .map_err(|err| format!("cannot read {}: {err}", path.display()))
    };
    let mut texts: BTreeMap<String, String> = BTreeMap::new();
    let entries =
        std::fs::read_dir(src).map_err(|err| format!("cannot list {}: {err}", src.display()))?;
    for entry in entries {
        let entry = entry.map_err(|err| format!("cannot list {}: {err}", src.display()))?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            let mut files = Vec::new();
            collect(&path, &mut files)?;
            files.sort();
            let mut text = String::new();
            for file in files {
                text.push_str(&read(&file)?);
                text.push('\n');
            }
            texts.insert(name, text);
        } else if let Some(module) = name.strip_suffix(".rs")
            && module != "lib"
        {
            texts.insert(module.to_owned(), read(&path)?);
        }
    }
    let exports = root_exports(&read(&src.join("lib.rs"))?);
    Ok(build_graph(&texts, &exports))
}

/// The graph of modules `texts` (name → source), resolving root re-exports by `exports`.
pub fn build_graph(texts: &BTreeMap<String, String>, exports: &BTreeMap<String, String>) -> Graph {
    let mut graph = Graph::new();
    for (module, text) in texts {
        let mut named = BTreeSet::new();
        for first in crate_paths(text) {
            let target = if texts.contains_key(&first) {
                Some(first)
            } else {
                exports.get(&first).cloned()
            };
            if let Some(target) = target
                && &target != module
            {
                named.insert(target);
            }
        }
        graph.insert(module.clone(), named);
    }
    graph
}

/// What `lib.rs` re-exports from its modules: item name → module (`pub use m::{A, B};`,
/// `pub use m::A;`).
pub fn root_exports(lib: &str) -> BTreeMap<String, String> {
    let mut exports = BTreeMap::new();
    for line in code_lines(lib) {
        let Some(rest) = line.trim().strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, items)) = rest.trim_end_matches(';').split_once("::") else {
            continue;
        };
        let items = items.trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let item = item.split_whitespace().last().unwrap_or("");
            if !item.is_empty() {
                exports.insert(item.to_owned(), module.to_owned());
            }
        }
    }
    exports
}

/// The first segment after every `crate::` outside comments, with `crate::{a, b::c}`
/// giving `a` and `b`.
pub fn crate_paths(text: &str) -> Vec<String> {
    let code: String = code_lines(text).collect::<Vec<_>>().join("\n");
    let mut out = Vec::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `mycrate::`, not `crate::`
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0usize;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        rest = &group[i..];
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && (c.is_alphanumeric() || c == '_') => {
                        out.push(ident_at(&group[i..]));
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            let ident = ident_at(rest);
            if !ident.is_empty() {
                out.push(ident);
            }
        }
    }
    out
}

/// A cycle of `graph` as its module names (the first repeated at the end), if any.
pub fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    // 0 = unseen, 1 = on the current path, 2 = done.
    let mut mark: BTreeMap<&str, u8> = BTreeMap::new();
    let mut path: Vec<&str> = Vec::new();
    fn visit<'g>(
        node: &'g str,
        graph: &'g Graph,
        mark: &mut BTreeMap<&'g str, u8>,
        path: &mut Vec<&'g str>,
    ) -> Option<Vec<String>> {
        mark.insert(node, 1);
        path.push(node);
        for next in graph.get(node).into_iter().flatten() {
            match mark.get(next.as_str()).copied().unwrap_or(0) {
                1 => {
                    let from = path.iter().position(|n| *n == next.as_str()).unwrap_or(0);
                    let mut cycle: Vec<String> =
                        path[from..].iter().map(|n| n.to_string()).collect();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(cycle) = visit(next, graph, mark, path) {
                        return Some(cycle);
                    }
                }
                _ => {}
            }
        }
        path.pop();
        mark.insert(node, 2);
        None
    }
    for node in graph.keys() {
        if mark.get(node.as_str()).copied().unwrap_or(0) == 0
            && let Some(cycle) = visit(node, graph, &mut mark, &mut path)
        {
            return Some(cycle);
        }
    }
    None
}

/// The lines of `text` with `//` comments removed (doc links are not imports).
fn code_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines().map(|line| match line.find("//") {
        Some(at) => &line[..at],
        None => line,
    })
}

/// The identifier at the start of `s`.
fn ident_at(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// Collects `*.rs` files below `dir`.
fn collect(dir: &Path, out: &mut Vec<std::path::PathBuf>) -> Result<(), String> {
    let entries =
        std::fs::read_dir(dir).map_err(|err| format!("cannot list {}: {err}", dir.display()))?;
    for entry in entries {
        let path = entry
            .map_err(|err| format!("cannot list {}: {err}", dir.display()))?
            .path();
        if path.is_dir() {
            collect(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modules(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(m, t)| (m.to_string(), t.to_string()))
            .collect()
    }

    #[test]
    fn paths_come_from_code_and_groups_not_comments() {
        let text = "use crate::batch::Batch;\nuse crate::{error::{Error, Result}, memory};\n\
                    /// See [`crate::loader::Loader`].\nlet x = crate::Batch::new(); // crate::gpu\n\
                    use mycrate::other;\n";
        assert_eq!(
            crate_paths(text),
            ["batch", "error", "memory", "Batch"].map(String::from)
        );
    }

    #[test]
    fn root_reexports_resolve_to_their_module() {
        let exports =
            root_exports("pub use batch::{Batch, BatchOutput};\npub use epoch::EpochIter;\n");
        assert_eq!(
            exports.get("BatchOutput").map(String::as_str),
            Some("batch")
        );
        assert_eq!(exports.get("EpochIter").map(String::as_str), Some("epoch"));
    }

    #[test]
    fn a_cycle_is_found_and_a_chain_is_not() {
        let exports = root_exports("pub use loader::Loader;\n");
        let chain = modules(&[
            ("loader", "use crate::epoch::EpochIter;"),
            ("epoch", "use crate::run_state::Shared;"),
            ("run_state", "// crate::loader::Loader\n"),
        ]);
        assert_eq!(find_cycle(&build_graph(&chain, &exports)), None);
        let cycle = modules(&[
            ("loader", "use crate::epoch::EpochIter;"),
            ("epoch", "use crate::run_state::Shared;"),
            ("run_state", "fn f(_: &crate::Loader) {}"),
        ]);
        assert_eq!(
            find_cycle(&build_graph(&cycle, &exports)),
            Some(
                ["epoch", "run_state", "loader", "epoch"]
                    .map(String::from)
                    .to_vec()
            )
        );
    }
}
