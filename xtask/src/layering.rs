//! The layering check of `cargo xtask tidy`: every internal dependency of a workspace
//! package (normal, build or dev) points to a strictly lower layer of the table in
//! `docs/ARCHITECTURE.md`, and every package has a layer there. The table's `dev:` line
//! names test-support crates: any package may have them as dev-dependencies, and the
//! packages of the top layer (the tools: benchmarks, cross-crate tests, which no other
//! package may depend on) also as normal dependencies, so that what a library or front
//! end ships never links test support; they themselves may depend on any layer.
//!
//! The dependency graph comes from `cargo metadata --no-deps` (so workspace inheritance,
//! renames and target-specific sections are already resolved), read by the small JSON
//! reader below: xtask has no dependencies, so it carries the few lines it needs rather
//! than `serde_json`.

use std::collections::BTreeMap;
use std::path::Path;

use crate::command::{cargo_command, stdout_of};

/// Where the layer table lives, between these two marker lines.
pub const TABLE_DOC: &str = "docs/ARCHITECTURE.md";
const BEGIN: &str = "<!-- layers:begin -->";
const END: &str = "<!-- layers:end -->";

/// Package name → layer number ([`DEV`] for the test-support crates).
pub type Layers = BTreeMap<String, u32>;

/// The layer of the `dev:` line: above every numbered layer, so that a test-support crate
/// may depend on any of them.
pub const DEV: u32 = u32::MAX;

/// One workspace package and its internal (path) dependencies: `(name, kind)`, where kind
/// is `normal`, `dev` or `build`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    /// The package name.
    pub name: String,
    /// Its dependencies inside the workspace.
    pub internal: Vec<(String, String)>,
}

/// Runs the check on the workspace at `root`.
pub fn check(root: &Path) -> Result<(), String> {
    let doc_path = root.join(TABLE_DOC);
    let doc = std::fs::read_to_string(&doc_path)
        .map_err(|err| format!("cannot read {}: {err}", doc_path.display()))?;
    let layers = parse_table(&doc)?;
    let text = stdout_of(
        cargo_command()
            .args([
                "metadata",
                "--format-version",
                "1",
                "--no-deps",
                "--offline",
            ])
            .current_dir(root),
        "cargo metadata",
    )?;
    let packages = packages_from_metadata(&text)?;
    let violations = violations(&layers, &packages);
    if violations.is_empty() {
        eprintln!(
            "    layering: {} packages in {} layers",
            packages.len(),
            top_layer(&layers).map_or(0, |top| top + 1)
        );
        Ok(())
    } else {
        Err(format!("layering ({TABLE_DOC}): {}", violations.join("; ")))
    }
}

/// Reads the layer table: the lines `N: a, b, c` between the marker lines (a line may
/// carry a `-- comment` after the names; other lines are ignored).
pub fn parse_table(doc: &str) -> Result<Layers, String> {
    let start = doc
        .find(BEGIN)
        .ok_or_else(|| format!("{TABLE_DOC} has no `{BEGIN}` line"))?;
    let body = &doc[start + BEGIN.len()..];
    let end = body
        .find(END)
        .ok_or_else(|| format!("{TABLE_DOC} has no `{END}` line after `{BEGIN}`"))?;
    let mut layers = Layers::new();
    for line in body[..end].lines() {
        let line = line.split("--").next().unwrap_or("").trim();
        let Some((number, names)) = line.split_once(':') else {
            continue;
        };
        let layer = match number.trim() {
            "dev" => DEV,
            n => match n.parse::<u32>() {
                Ok(layer) if layer != DEV => layer,
                _ => continue,
            },
        };
        for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if layers.insert(name.to_owned(), layer).is_some() {
                return Err(format!("the layer table names `{name}` twice"));
            }
        }
    }
    if layers.is_empty() {
        return Err(format!("the layer table of {TABLE_DOC} is empty"));
    }
    Ok(layers)
}

/// The top numbered layer: its packages are the tools, which nothing else may depend on.
pub fn top_layer(layers: &Layers) -> Option<u32> {
    layers.values().copied().filter(|&l| l != DEV).max()
}

/// Every rule the packages break: a package missing from the table, an internal
/// dependency on a package of the same or a higher layer, or a test-support crate used
/// other than as a dev-dependency, or as a normal dependency of a top-layer tool.
pub fn violations(layers: &Layers, packages: &[Package]) -> Vec<String> {
    let top = top_layer(layers);
    let mut found = Vec::new();
    for package in packages {
        let Some(&own) = layers.get(&package.name) else {
            found.push(format!(
                "package `{}` has no layer in the table",
                package.name
            ));
            continue;
        };
        for (dep, kind) in &package.internal {
            match layers.get(dep) {
                Some(&DEV)
                    if own != DEV && (kind == "dev" || (kind == "normal" && Some(own) == top)) => {}
                Some(&DEV) => found.push(format!(
                    "`{}` has a {kind} dependency on `{dep}`, a test-support crate (the `dev:` \
                     line), which may only be a dev-dependency of a layered crate, or a normal \
                     dependency of a tool of the top layer ({})",
                    package.name,
                    top.map_or_else(|| "none".to_owned(), |t| t.to_string())
                )),
                Some(&layer) if layer < own => {}
                Some(&layer) => found.push(format!(
                    "`{}` (layer {own}) has a {kind} dependency on `{dep}` (layer {layer}); \
                     a crate may depend only on lower layers",
                    package.name
                )),
                None => found.push(format!(
                    "`{}` depends on `{dep}`, which has no layer in the table",
                    package.name
                )),
            }
        }
    }
    found
}

/// The workspace packages and their path dependencies, from `cargo metadata` JSON.
pub fn packages_from_metadata(text: &str) -> Result<Vec<Package>, String> {
    let value = Json::parse(text)?;
    let packages = value
        .get("packages")
        .and_then(Json::as_array)
        .ok_or("`cargo metadata` output has no `packages` list")?;
    let mut out = Vec::new();
    for package in packages {
        let name = package
            .get("name")
            .and_then(Json::as_str)
            .ok_or("a package without a name in `cargo metadata` output")?;
        let mut internal = Vec::new();
        for dep in package
            .get("dependencies")
            .and_then(Json::as_array)
            .unwrap_or(&[])
        {
            // Only path dependencies are workspace crates.
            if dep.get("path").is_none() {
                continue;
            }
            let dep_name = dep
                .get("name")
                .and_then(Json::as_str)
                .ok_or("a dependency without a name in `cargo metadata` output")?;
            let kind = dep.get("kind").and_then(Json::as_str).unwrap_or("normal");
            internal.push((dep_name.to_owned(), kind.to_owned()));
        }
        out.push(Package {
            name: name.to_owned(),
            internal,
        });
    }
    Ok(out)
}

/// A JSON value, as much of it as the check reads.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// A number, kept as its text (the check reads none).
    Number(String),
    /// A string, unescaped.
    String(String),
    /// An array.
    Array(Vec<Json>),
    /// An object, in file order.
    Object(Vec<(String, Json)>),
}

impl Json {
    /// Parses one JSON document (surrounding whitespace allowed).
    pub fn parse(text: &str) -> Result<Json, String> {
        let mut parser = Parser {
            bytes: text.as_bytes(),
            at: 0,
        };
        let value = parser.value(0)?;
        parser.skip_ws();
        if parser.at != parser.bytes.len() {
            return Err(parser.error("trailing characters"));
        }
        Ok(value)
    }

    /// The member `key` of an object.
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The elements of an array.
    pub fn as_array(&self) -> Option<&[Json]> {
        match self {
            Json::Array(items) => Some(items),
            _ => None,
        }
    }

    /// The text of a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }
}

/// Nesting deeper than this is refused (cargo's output is a few levels deep).
const MAX_DEPTH: usize = 64;

struct Parser<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn error(&self, what: &str) -> String {
        format!(
            "`cargo metadata` output is not JSON: {what} at byte {}",
            self.at
        )
    }

    fn skip_ws(&mut self) {
        while self
            .bytes
            .get(self.at)
            .is_some_and(|b| b.is_ascii_whitespace())
        {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> bool {
        self.skip_ws();
        if self.bytes.get(self.at) == Some(&byte) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn literal(&mut self, word: &str, value: Json) -> Result<Json, String> {
        if self.bytes[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            Ok(value)
        } else {
            Err(self.error("unknown literal"))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, String> {
        if depth > MAX_DEPTH {
            return Err(self.error("nesting too deep"));
        }
        self.skip_ws();
        match self.bytes.get(self.at) {
            None => Err(self.error("unexpected end")),
            Some(b'n') => self.literal("null", Json::Null),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'"') => self.string().map(Json::String),
            Some(b'[') => {
                self.at += 1;
                let mut items = Vec::new();
                if self.eat(b']') {
                    return Ok(Json::Array(items));
                }
                loop {
                    items.push(self.value(depth + 1)?);
                    if self.eat(b']') {
                        return Ok(Json::Array(items));
                    }
                    if !self.eat(b',') {
                        return Err(self.error("expected `,` or `]`"));
                    }
                }
            }
            Some(b'{') => {
                self.at += 1;
                let mut members = Vec::new();
                if self.eat(b'}') {
                    return Ok(Json::Object(members));
                }
                loop {
                    self.skip_ws();
                    let key = self.string()?;
                    if !self.eat(b':') {
                        return Err(self.error("expected `:`"));
                    }
                    members.push((key, self.value(depth + 1)?));
                    if self.eat(b'}') {
                        return Ok(Json::Object(members));
                    }
                    if !self.eat(b',') {
                        return Err(self.error("expected `,` or `}`"));
                    }
                }
            }
            Some(b) if *b == b'-' || b.is_ascii_digit() => {
                let start = self.at;
                while self
                    .bytes
                    .get(self.at)
                    .is_some_and(|b| matches!(b, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'))
                {
                    self.at += 1;
                }
                Ok(Json::Number(
                    String::from_utf8_lossy(&self.bytes[start..self.at]).into_owned(),
                ))
            }
            Some(_) => Err(self.error("unexpected character")),
        }
    }

    /// A string starting at the current `"`, escapes resolved (surrogate pairs joined; a
    /// lone surrogate becomes U+FFFD).
    fn string(&mut self) -> Result<String, String> {
        if self.bytes.get(self.at) != Some(&b'"') {
            return Err(self.error("expected a string"));
        }
        self.at += 1;
        let mut out = Vec::new();
        loop {
            let Some(&b) = self.bytes.get(self.at) else {
                return Err(self.error("unterminated string"));
            };
            self.at += 1;
            match b {
                b'"' => break,
                b'\\' => {
                    let Some(&e) = self.bytes.get(self.at) else {
                        return Err(self.error("unterminated escape"));
                    };
                    self.at += 1;
                    let c = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let high = self.hex4()?;
                            if (0xD800..0xDC00).contains(&high)
                                && self.bytes[self.at..].starts_with(b"\\u")
                            {
                                self.at += 2;
                                let low = self.hex4()?;
                                if (0xDC00..0xE000).contains(&low) {
                                    let code = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
                                    char::from_u32(code).unwrap_or('\u{FFFD}')
                                } else {
                                    '\u{FFFD}'
                                }
                            } else {
                                char::from_u32(high).unwrap_or('\u{FFFD}')
                            }
                        }
                        _ => return Err(self.error("bad escape")),
                    };
                    let mut buf = [0; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
                _ => out.push(b),
            }
        }
        String::from_utf8(out).map_err(|_| self.error("invalid UTF-8 in a string"))
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self
            .bytes
            .get(self.at..self.at + 4)
            .and_then(|d| std::str::from_utf8(d).ok())
            .and_then(|d| u32::from_str_radix(d, 16).ok())
            .ok_or_else(|| self.error("bad \\u escape"))?;
        self.at += 4;
        Ok(digits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn package(name: &str, deps: &[(&str, &str)]) -> Package {
        Package {
            name: name.to_owned(),
            internal: deps
                .iter()
                .map(|(d, k)| ((*d).to_owned(), (*k).to_owned()))
                .collect(),
        }
    }

    const DOC: &str = "# Architecture\n\
        text before\n\
        <!-- layers:begin -->\n\
        ```text\n\
        0: low-a, low-b   -- no internal dependencies\n\
        1: mid\n\
        2: top\n\
        dev: kit     -- test support\n\
        ```\n\
        <!-- layers:end -->\n\
        9: ignored-after-the-table\n";

    #[test]
    fn the_table_is_read_between_its_markers() {
        let layers = parse_table(DOC).unwrap();
        let got: Vec<_> = layers.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(
            got,
            [
                ("kit", DEV),
                ("low-a", 0),
                ("low-b", 0),
                ("mid", 1),
                ("top", 2)
            ]
        );
        assert!(
            parse_table("no markers")
                .unwrap_err()
                .contains("layers:begin")
        );
        let twice = DOC.replace("1: mid", "1: mid, low-a");
        assert!(parse_table(&twice).unwrap_err().contains("`low-a` twice"));
    }

    #[test]
    fn only_dependencies_on_lower_layers_pass() {
        let layers = parse_table(DOC).unwrap();
        let good = [
            package("low-a", &[]),
            package("mid", &[("low-a", "normal"), ("low-b", "dev")]),
            package(
                "top",
                &[("mid", "normal"), ("low-b", "build"), ("kit", "dev")],
            ),
            package("low-a", &[("kit", "dev")]),
            // A tool of the top layer may run the test support's servers.
            package("top", &[("kit", "normal")]),
            package("kit", &[("top", "normal"), ("low-a", "normal")]),
        ];
        assert_eq!(violations(&layers, &good), Vec::<String>::new());

        let bad = [
            package("low-a", &[("low-b", "dev")]),
            package("mid", &[("top", "normal")]),
            package("new-crate", &[]),
            package("top", &[("unlisted", "normal")]),
            package("mid", &[("kit", "normal")]),
            package("kit", &[("kit", "dev")]),
            package("low-a", &[("kit", "normal")]),
            package("top", &[("kit", "build")]),
        ];
        let found = violations(&layers, &bad);
        assert_eq!(found.len(), 8, "{found:?}");
        assert!(found[0].contains("`low-a` (layer 0) has a dev dependency on `low-b` (layer 0)"));
        assert!(found[1].contains("`mid` (layer 1) has a normal dependency on `top` (layer 2)"));
        assert!(found[2].contains("`new-crate` has no layer"));
        assert!(found[3].contains("`unlisted`, which has no layer"));
        assert!(found[4].contains("`mid` has a normal dependency on `kit`, a test-support"));
        assert!(found[5].contains("`kit` has a dev dependency on `kit`, a test-support"));
        assert!(found[6].contains("`low-a` has a normal dependency on `kit`"));
        assert!(
            found[6].contains("of a tool of the top layer (2)"),
            "{}",
            found[6]
        );
        assert!(found[7].contains("`top` has a build dependency on `kit`"));
        assert_eq!(top_layer(&layers), Some(2));
    }

    #[test]
    fn metadata_json_gives_path_dependencies_with_their_kind() {
        let text = r#"{"packages": [
            {"name": "mid", "version": "0.1.0", "dependencies": [
                {"name": "low-a", "kind": null, "path": "/w/crates/low-a", "req": "*"},
                {"name": "serde", "kind": null, "req": "^1", "features": ["derive"]},
                {"name": "low-b", "kind": "dev", "path": "/w/crates/low-b", "optional": false}
            ]},
            {"name": "low-a", "dependencies": [], "metadata": {"x": [1.5e3, -2, true, "\u00e9\\"]}}
        ], "workspace_root": "/w"}"#;
        let packages = packages_from_metadata(text).unwrap();
        assert_eq!(
            packages,
            [
                package("mid", &[("low-a", "normal"), ("low-b", "dev")]),
                package("low-a", &[]),
            ]
        );
    }

    #[test]
    fn malformed_json_is_an_error_not_a_panic() {
        for text in [
            "",
            "{",
            "[1,",
            r#"{"a" 1}"#,
            r#""\u12"#,
            "nul",
            "[1] x",
            r#""\q""#,
        ] {
            assert!(Json::parse(text).is_err(), "{text:?}");
        }
        let deep = "[".repeat(100) + &"]".repeat(100);
        assert!(Json::parse(&deep).unwrap_err().contains("too deep"));
        assert_eq!(
            Json::parse(r#""\ud83d\ude00 \n""#).unwrap(),
            Json::String("\u{1F600} \n".to_owned())
        );
    }
}
