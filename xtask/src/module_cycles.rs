//! The import-loop check of `cargo xtask tidy`: in every crate of the workspace
//! (`crates/*/src`, `tests/src`, `xtask/src`), the module files import each other in no
//! loop, at every depth (`decode::defaults` ↔ `decode::fixed_bytes` as much as `loader` ↔
//! `epoch`), so that each file can be read knowing only the files below it. A loop is
//! broken by moving the shared item into a module below both (see docs/ARCHITECTURE.md).
//!
//! The graph's nodes are module files; file A points to file B when A's code names an
//! item of B: a `use` of a `crate::`, `super::`, `self::` or child-module path, or such a
//! path in code (`crate::x::Y::new()`, `super::f()`, `child::g()`, `alias::h()` after
//! `use crate::x as alias`). A path is followed through re-exports to the file that
//! defines the item (`crate::Batch` with `pub use batch::Batch;` in `lib.rs` names
//! `batch.rs`), so children that use each other through their parent's re-exports point
//! at each other, not at the parent. What a parent does to its own children is not an
//! import by itself: `mod child;` declares the child and `pub use child::X;` re-exports
//! it, so a parent that only declares and re-exports is no loop with children that use
//! its items; a parent that uses a child's item (privately imported, named by path, or
//! re-exported and also used in its own code) points at the child. The scan is textual
//! ([`scan`]), which is enough for this workspace's plain module style and keeps xtask
//! free of a parser.

mod scan;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use scan::{FileScan, ModPath, Scope};

/// Module file (`crate`, `decode`, `decode::defaults`) → the module files it names, each
/// with the first path that names it (the edge's reason in a report).
pub type Graph = BTreeMap<String, BTreeMap<String, String>>;

/// Runs the check on every crate root of the workspace at `root`; one error lists every
/// loop of every crate.
pub fn check(root: &Path) -> Result<(), String> {
    let mut reports = Vec::new();
    let roots = crate_roots(root)?;
    for file in &roots {
        let graph = graph_of(file)?;
        let shown = file
            .strip_prefix(root)
            .unwrap_or(file)
            .display()
            .to_string();
        for component in loops(&graph) {
            reports.push(describe(&shown, &graph, &component));
        }
    }
    if reports.is_empty() {
        eprintln!("    {} crate roots have no import loop", roots.len());
        return Ok(());
    }
    Err(format!(
        "{} import loop(s) between module files (move the shared items into a module below \
         both, see docs/ARCHITECTURE.md):\n{}",
        reports.len(),
        reports.join("\n")
    ))
}

/// The crate root files: `src/lib.rs`, `src/main.rs` and `src/bin/*.rs` of every package
/// under `crates/`, of `tests/` and of `xtask/`.
pub fn crate_roots(root: &Path) -> Result<Vec<PathBuf>, String> {
    let mut packages = vec![root.join("tests"), root.join("xtask")];
    let crates = root.join("crates");
    let entries = std::fs::read_dir(&crates)
        .map_err(|err| format!("cannot list {}: {err}", crates.display()))?;
    for entry in entries {
        let entry = entry.map_err(|err| format!("cannot list {}: {err}", crates.display()))?;
        packages.push(entry.path());
    }
    let mut roots = Vec::new();
    for package in packages {
        let src = package.join("src");
        roots.extend(
            ["lib.rs", "main.rs"]
                .iter()
                .map(|f| src.join(f))
                .filter(|p| p.is_file()),
        );
        if let Ok(bins) = std::fs::read_dir(src.join("bin")) {
            for bin in bins.flatten() {
                if bin.path().extension().is_some_and(|e| e == "rs") {
                    roots.push(bin.path());
                }
            }
        }
    }
    roots.sort();
    Ok(roots)
}

/// The module-file graph of the crate whose root file is `root_file`, read from disk.
pub fn graph_of(root_file: &Path) -> Result<Graph, String> {
    let dir = root_file.parent().unwrap_or(Path::new("."));
    let name = root_file.file_name().map(PathBuf::from).unwrap_or_default();
    let read = |rel: &Path| -> Result<Option<String>, String> {
        let path = dir.join(rel);
        if !path.is_file() {
            return Ok(None);
        }
        std::fs::read_to_string(&path)
            .map(Some)
            .map_err(|err| format!("cannot read {}: {err}", path.display()))
    };
    let files = read_crate(&name, &read)?;
    Ok(build_graph(&files))
}

/// Reads the crate from its root file `root` (relative to the crate's source folder)
/// through `read`, following `mod name;` to `name.rs` or `name/mod.rs`: module path →
/// that file's scan.
pub fn read_crate(
    root: &Path,
    read: &dyn Fn(&Path) -> Result<Option<String>, String>,
) -> Result<BTreeMap<ModPath, FileScan>, String> {
    let mut files = BTreeMap::new();
    // (module path, file, the folder its children's files are in)
    let mut queue = vec![(ModPath::new(), root.to_path_buf(), PathBuf::new())];
    while let Some((module, file, child_dir)) = queue.pop() {
        let text = read(&file)?.ok_or_else(|| format!("cannot read {}", file.display()))?;
        let found = scan::scan(&text, &module);
        for (parent, name) in &found.children {
            // An inline `mod a { mod b; }` looks for `b` under `a/`.
            let mut dir = child_dir.clone();
            dir.extend(&parent[module.len()..]);
            let mut child = parent.clone();
            child.push(name.clone());
            let flat = dir.join(format!("{name}.rs"));
            let nested = dir.join(name).join("mod.rs");
            if read(&flat)?.is_some() {
                queue.push((child, flat, dir.join(name)));
            } else if read(&nested)?.is_some() {
                queue.push((child, nested, dir.join(name)));
            } else {
                return Err(format!(
                    "{}: `mod {name};` has neither {} nor {}",
                    file.display(),
                    flat.display(),
                    nested.display()
                ));
            }
        }
        files.insert(module, found);
    }
    Ok(files)
}

/// The graph of the module files `files` (module path → scan).
pub fn build_graph(files: &BTreeMap<ModPath, FileScan>) -> Graph {
    let krate = Crate::new(files);
    let mut graph = Graph::new();
    for (file, found) in files {
        let mut edges: BTreeMap<String, String> = BTreeMap::new();
        let mut add = |target: &ModPath, why: String| {
            if target != file {
                edges.entry(display(target)).or_insert(why);
            }
        };
        for (module, scope) in &found.scopes {
            for u in &scope.uses {
                let Some((target, item)) = krate.resolve(module, &u.segs, 0) else {
                    continue;
                };
                let target_file = &krate.file_of(&target);
                if item.is_none() && u.name.is_some() {
                    continue; // a module imported by name: its uses in code are the edges
                }
                let below = target_file.len() > file.len() && target_file.starts_with(file);
                if u.public && below {
                    // The parent's re-export: an edge only if the parent's code uses it.
                    if let Some(name) = &u.name
                        && scope.idents.contains(name)
                    {
                        add(target_file, format!("{name} (re-exported and used here)"));
                    }
                    continue;
                }
                add(target_file, format!("use {}", u.segs.join("::")));
            }
            for path in &scope.paths {
                if let Some((target, _)) = krate.resolve(module, path, 0) {
                    add(&krate.file_of(&target), path.join("::"));
                }
            }
        }
        graph.insert(display(file), edges);
    }
    graph
}

/// A module path as shown: `crate` for the root, else `a::b`.
fn display(module: &[String]) -> String {
    if module.is_empty() {
        "crate".to_owned()
    } else {
        module.join("::")
    }
}

/// The modules of one crate, to resolve paths with.
struct Crate<'a> {
    files: &'a BTreeMap<ModPath, FileScan>,
    scopes: BTreeMap<&'a ModPath, &'a Scope>,
}

impl<'a> Crate<'a> {
    fn new(files: &'a BTreeMap<ModPath, FileScan>) -> Crate<'a> {
        let scopes = files.values().flat_map(|f| &f.scopes).collect();
        Crate { files, scopes }
    }

    fn is_module(&self, module: &ModPath) -> bool {
        self.scopes.contains_key(module) || self.files.contains_key(module)
    }

    /// The file holding `module`: itself, or the file an inline module is written in.
    fn file_of(&self, module: &[String]) -> ModPath {
        let mut len = module.len();
        while len > 0 && !self.files.contains_key(&module[..len]) {
            len -= 1;
        }
        module[..len].to_vec()
    }

    /// The module (and the item in it, if the path goes on) that `segs`, written in
    /// `module`, names inside the crate; `None` for a path outside it (`std::…`, another
    /// crate, a local name).
    fn resolve(
        &self,
        module: &ModPath,
        segs: &[String],
        depth: usize,
    ) -> Option<(ModPath, Option<String>)> {
        let first = segs.first()?;
        let (mut at, mut rest): (ModPath, &[String]) = match first.as_str() {
            "crate" => (ModPath::new(), &segs[1..]),
            "super" | "self" => {
                let mut at = module.clone();
                let mut n = 0;
                while let Some(s) = segs.get(n) {
                    match s.as_str() {
                        "super" => {
                            at.pop()?;
                        }
                        "self" => {}
                        _ => break,
                    }
                    n += 1;
                }
                (at, &segs[n..])
            }
            _ => {
                let mut child = module.clone();
                child.push(first.clone());
                if self.is_module(&child) {
                    (module.clone(), segs)
                } else {
                    // A module imported by name (`use crate::x as y;` then `y::f()`).
                    let scope = self.scopes.get(module)?;
                    let u = scope
                        .uses
                        .iter()
                        .find(|u| u.name.as_deref() == Some(first.as_str()))?;
                    if depth > 8 {
                        return None;
                    }
                    let (target, None) = self.resolve(module, &u.segs, depth + 1)? else {
                        return None; // an item (`Enum::Variant`): its `use` is the edge
                    };
                    (target, &segs[1..])
                }
            }
        };
        while let Some(seg) = rest.first() {
            let mut next = at.clone();
            next.push(seg.clone());
            if !self.is_module(&next) {
                break;
            }
            at = next;
            rest = &rest[1..];
        }
        match rest.first() {
            None => Some((at, None)),
            Some(item) => Some(self.item(at, item, depth)),
        }
    }

    /// Where `name`, named as an item of `module`, is defined: followed through the
    /// module's `use` declarations (re-exports, and the imports its children may name
    /// through `super::`), then its globs; `module` itself when nothing says otherwise.
    fn item(&self, module: ModPath, name: &str, depth: usize) -> (ModPath, Option<String>) {
        let here = (module.clone(), Some(name.to_owned()));
        let Some(scope) = self.scopes.get(&module) else {
            return here;
        };
        if depth > 8 || scope.defined.contains(name) {
            return here;
        }
        if let Some(u) = scope.uses.iter().find(|u| u.name.as_deref() == Some(name)) {
            return self.resolve(&module, &u.segs, depth + 1).unwrap_or(here);
        }
        for glob in scope.uses.iter().filter(|u| u.name.is_none()) {
            if let Some((from, None)) = self.resolve(&module, &glob.segs, depth + 1)
                && self.scopes.get(&from).is_some_and(|s| {
                    s.defined.contains(name)
                        || s.uses.iter().any(|u| u.name.as_deref() == Some(name))
                })
            {
                return self.item(from, name, depth + 1);
            }
        }
        here
    }
}

/// The loops of `graph`: its strongly connected components of more than one file, each
/// sorted, in order of their first file.
pub fn loops(graph: &Graph) -> Vec<Vec<String>> {
    // Tarjan's algorithm, recursive: module trees are shallow and small.
    struct State<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, node: &'g str) {
        let n = s.index.len();
        s.index.insert(node, n);
        s.low.insert(node, n);
        s.stack.push(node);
        s.on_stack.insert(node);
        for next in s.graph.get(node).into_iter().flat_map(|e| e.keys()) {
            let next = next.as_str();
            if !s.index.contains_key(next) {
                visit(s, next);
                let low = s.low[node].min(s.low[next]);
                s.low.insert(node, low);
            } else if s.on_stack.contains(next) {
                let low = s.low[node].min(s.index[next]);
                s.low.insert(node, low);
            }
        }
        if s.low[node] == s.index[node] {
            let mut component = Vec::new();
            while let Some(top) = s.stack.pop() {
                s.on_stack.remove(top);
                component.push(top.to_owned());
                if top == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for node in graph.keys() {
        if !s.index.contains_key(node.as_str()) {
            visit(&mut s, node);
        }
    }
    s.out.sort();
    s.out
}

/// A shortest cycle through the first file of `component` (a loop of `graph`), as its
/// files with the first repeated at the end.
pub fn cycle_in(graph: &Graph, component: &[String]) -> Vec<String> {
    let inside: BTreeSet<&str> = component.iter().map(String::as_str).collect();
    let start = component[0].as_str();
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut frontier = vec![start];
    while !frontier.is_empty() {
        let mut next_frontier = Vec::new();
        for node in frontier {
            for next in graph[node].keys().map(String::as_str) {
                if next == start {
                    // `node` back to `start` through `came_from`, then turned around.
                    let mut cycle = vec![start.to_owned()];
                    let mut at = node;
                    while at != start {
                        cycle.push(at.to_owned());
                        at = came_from[at];
                    }
                    cycle.push(start.to_owned());
                    let last = cycle.len() - 1;
                    cycle[1..last].reverse();
                    return cycle;
                }
                if inside.contains(next) && !came_from.contains_key(next) {
                    came_from.insert(next, node);
                    next_frontier.push(next);
                }
            }
        }
        frontier = next_frontier;
    }
    component.to_vec()
}

/// One loop of the crate rooted at `root_file`, for the report: its files, a cycle
/// through them and why each step of the cycle is an edge.
fn describe(root_file: &str, graph: &Graph, component: &[String]) -> String {
    let cycle = cycle_in(graph, component);
    let mut out = format!(
        "  {root_file}: {} files: {}\n    cycle: {}",
        component.len(),
        component.join(", "),
        cycle.join(" -> ")
    );
    for pair in cycle.windows(2) {
        let why = &graph[&pair[0]][&pair[1]];
        out.push_str(&format!("\n      {} -> {}: {why}", pair[0], pair[1]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A crate from `(file, text)` pairs, the first its root.
    fn graph(files: &[(&str, &str)]) -> Graph {
        let map: BTreeMap<PathBuf, String> = files
            .iter()
            .map(|(f, t)| (PathBuf::from(f), t.to_string()))
            .collect();
        let read = |p: &Path| Ok(map.get(p).cloned());
        build_graph(&read_crate(Path::new(files[0].0), &read).unwrap())
    }

    fn edges(g: &Graph, from: &str) -> Vec<String> {
        g[from].keys().cloned().collect()
    }

    #[test]
    fn files_are_found_flat_nested_and_under_inline_modules() {
        let g = graph(&[
            ("lib.rs", "mod a;\nmod b;\nmod c { pub mod d; }"),
            ("a.rs", "mod inner;"),
            ("a/inner.rs", ""),
            ("b/mod.rs", "mod leaf;"),
            ("b/leaf.rs", ""),
            ("c/d.rs", ""),
        ]);
        let files: Vec<&str> = g.keys().map(String::as_str).collect();
        assert_eq!(files, ["a", "a::inner", "b", "b::leaf", "c::d", "crate"]);
    }

    #[test]
    fn paths_resolve_through_reexports_to_the_defining_file() {
        let g = graph(&[
            ("lib.rs", "mod batch;\nmod loader;\npub use batch::Batch;"),
            ("batch.rs", "pub struct Batch;"),
            ("loader.rs", "fn f(_: &crate::Batch) {}"),
        ]);
        assert_eq!(edges(&g, "loader"), ["batch"]);
        assert!(
            edges(&g, "crate").is_empty(),
            "a re-export alone is no edge"
        );
    }

    #[test]
    fn siblings_through_the_parent_point_at_each_other() {
        let g = graph(&[
            ("lib.rs", "mod decode;"),
            (
                "decode/mod.rs",
                "mod defaults;\nmod fixed_bytes;\npub use defaults::Int;\n\
                 pub use fixed_bytes::Fixed;\npub trait Decoder {}",
            ),
            (
                "decode/defaults.rs",
                "use super::{Decoder, Fixed};\npub struct Int;",
            ),
            (
                "decode/fixed_bytes.rs",
                "pub struct Fixed;\nfn f() { super::defaults::helper(); }",
            ),
        ]);
        assert_eq!(
            edges(&g, "decode::defaults"),
            ["decode", "decode::fixed_bytes"]
        );
        assert_eq!(edges(&g, "decode::fixed_bytes"), ["decode::defaults"]);
        assert!(edges(&g, "decode").is_empty());
        assert_eq!(
            loops(&g),
            [vec![
                "decode::defaults".to_owned(),
                "decode::fixed_bytes".to_owned()
            ]]
        );
    }

    #[test]
    fn a_parent_that_uses_its_child_and_is_used_by_it_is_a_loop() {
        let parent = |extra: &str| {
            graph(&[
                ("lib.rs", "mod ops;"),
                (
                    "ops/mod.rs",
                    &format!("mod flip;\npub use flip::Flip;\npub trait Op {{}}\n{extra}"),
                ),
                ("ops/flip.rs", "use super::Op;\npub struct Flip;"),
            ])
        };
        // Declaring and re-exporting only: no loop.
        assert!(loops(&parent("")).is_empty());
        // Using the re-exported name, importing privately, or naming by path: a loop.
        for extra in [
            "fn f() -> Flip { Flip }",
            "use self::flip::Flip as F2;",
            "fn g() { flip::make(); }",
        ] {
            assert_eq!(
                loops(&parent(extra)),
                [vec!["ops".to_owned(), "ops::flip".to_owned()]],
                "{extra}"
            );
        }
    }

    #[test]
    fn module_aliases_globs_and_test_code() {
        let g = graph(&[
            ("lib.rs", "mod a;\nmod b;\nmod c;\nmod d;"),
            ("a.rs", "use crate::b as bee;\nfn f() { bee::g(); }"),
            (
                "b.rs",
                "pub fn g() {}\n#[cfg(test)]\nmod tests { use crate::a::*; }",
            ),
            ("c.rs", "use crate::d::*;"),
            ("d.rs", "use std::io::Read;\nfn h() { std::mem::drop(1); }"),
        ]);
        assert_eq!(edges(&g, "a"), ["b"]);
        assert!(edges(&g, "b").is_empty(), "test code is not scanned");
        assert_eq!(edges(&g, "c"), ["d"]);
        assert!(
            edges(&g, "d").is_empty(),
            "paths outside the crate are not edges"
        );
    }

    #[test]
    fn every_loop_is_found_with_a_shortest_cycle() {
        let g: Graph = [
            ("a", vec!["b"]),
            ("b", vec!["c", "a"]),
            ("c", vec!["a"]),
            ("d", vec!["e"]),
            ("e", vec!["d"]),
            ("f", vec!["a"]),
        ]
        .into_iter()
        .map(|(n, to)| {
            let to = to.into_iter().map(|t| (t.to_owned(), format!("{n}->{t}")));
            (n.to_owned(), to.collect())
        })
        .collect();
        let found = loops(&g);
        assert_eq!(found, [vec!["a", "b", "c"], vec!["d", "e"]]);
        assert_eq!(cycle_in(&g, &found[0]), ["a", "b", "a"]);
        let text = describe("src/lib.rs", &g, &found[1]);
        assert!(text.contains("cycle: d -> e -> d") && text.contains("e -> d: e->d"));
    }
}
