//! What one Rust source file says about the modules it depends on, read textually for
//! [`super`]'s import-loop check: the `mod` declarations (files and inline modules), the
//! `use` declarations, the paths in code that start at a module (`crate::`, `super::`,
//! `self::`, a child module or an imported module), the names the code mentions and the
//! items each module defines.
//!
//! A small lexer blanks comments, strings and character literals first, so that a doc
//! link or an error message that mentions `crate::x` is not an import. Code under
//! `#[cfg(test)]` (a `mod tests` block, a test-only file) is skipped: a test may reach any
//! module to set up its case, and is not what a reader of the module needs first.

use std::collections::{BTreeMap, BTreeSet};

/// A module's path inside its crate, without `crate` (the root is empty).
pub type ModPath = Vec<String>;

/// One name a `use` declaration binds (or a glob it imports).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Use {
    /// The full path as written, `self` of a group folded into its prefix
    /// (`use a::{self, B}` gives `a` and `a::B`).
    pub segs: Vec<String>,
    /// The name bound in the module (`as` applied); `None` for a glob.
    pub name: Option<String>,
    /// Whether the declaration is `pub` (any visibility): a re-export.
    pub public: bool,
}

/// What the code of one module (a file or an inline `mod x { … }`) mentions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scope {
    /// Its `use` declarations, those inside function bodies included.
    pub uses: Vec<Use>,
    /// Paths in code (outside `use`): an identifier followed by `::`, with every segment
    /// after it (`crate::a::B::new` → `crate`, `a`, `B`, `new`).
    pub paths: Vec<Vec<String>>,
    /// The identifiers its code mentions outside `use` declarations and field or method
    /// access (`.name`), to tell whether a re-exported name is also used here.
    pub idents: BTreeSet<String>,
    /// The names of the items it defines (`fn`, `struct`, `mod`, … and `macro_rules!`).
    pub defined: BTreeSet<String>,
}

/// One file's facts: a scope per module it holds (its own, then its inline modules).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileScan {
    /// Module path → what its code mentions.
    pub scopes: BTreeMap<ModPath, Scope>,
    /// `mod name;` declarations: the declaring module and the child's name.
    pub children: Vec<(ModPath, String)>,
}

/// Reads `text`, the file of module `module`.
pub fn scan(text: &str, module: &[String]) -> FileScan {
    let toks = tokens(&code_only(text));
    let mut out = FileScan::default();
    out.scopes.insert(module.to_vec(), Scope::default());
    // One entry per open `{`: the inline module it opens, if any.
    let mut frames: Vec<Option<String>> = Vec::new();
    let mut pending_mod: Option<String> = None;
    let mut test_only = false;
    let mut i = 0;
    while i < toks.len() {
        let current: ModPath = module
            .iter()
            .cloned()
            .chain(frames.iter().flatten().cloned())
            .collect();
        if toks[i] == Tok::Punct('#') {
            let open = i + 1 + usize::from(toks.get(i + 1) == Some(&Tok::Punct('!')));
            if toks.get(open) == Some(&Tok::Punct('[')) {
                let end = matching(&toks, open);
                test_only |= is_cfg_test(&toks[open + 1..end.min(toks.len())]);
                i = end + 1;
                continue;
            }
        }
        if test_only {
            test_only = false;
            i = skip_item(&toks, i);
            continue;
        }
        let scope = out.scopes.entry(current.clone()).or_default();
        match &toks[i] {
            Tok::Ident(kw) if kw == "use" => {
                let end = (i..toks.len())
                    .find(|&j| toks[j] == Tok::Punct(';'))
                    .unwrap_or(toks.len());
                let public = is_public(&toks[..i]);
                let mut items = Vec::new();
                use_tree(&toks[i + 1..end], &mut Vec::new(), &mut items);
                scope.uses.extend(
                    items
                        .into_iter()
                        .map(|(segs, name)| Use { segs, name, public }),
                );
                i = end + 1;
                continue;
            }
            Tok::Ident(kw) if kw == "mod" => {
                if let Some(Tok::Ident(name)) = toks.get(i + 1) {
                    scope.defined.insert(name.clone());
                    if toks.get(i + 2) == Some(&Tok::Punct(';')) {
                        out.children.push((current, name.clone()));
                    } else {
                        pending_mod = Some(name.clone());
                    }
                    i += 2;
                    continue;
                }
            }
            Tok::Ident(kw) if DEFINING.contains(&kw.as_str()) => {
                let mut j = i + 1;
                while let Some(Tok::Ident(w)) = toks.get(j)
                    && MODIFIERS.contains(&w.as_str())
                {
                    j += 1;
                }
                if let Some(Tok::Ident(name)) = toks.get(j) {
                    scope.defined.insert(name.clone());
                }
            }
            Tok::Ident(kw) if kw == "macro_rules" && toks.get(i + 1) == Some(&Tok::Punct('!')) => {
                if let Some(Tok::Ident(name)) = toks.get(i + 2) {
                    scope.defined.insert(name.clone());
                }
            }
            Tok::Punct('{') => frames.push(pending_mod.take()),
            Tok::Punct('}') => {
                frames.pop();
            }
            _ => {}
        }
        if let Tok::Ident(word) = &toks[i] {
            let after_dot = i > 0 && toks[i - 1] == Tok::Punct('.');
            let mid_path = i > 0 && toks[i - 1] == Tok::Path;
            if !after_dot {
                scope.idents.insert(word.clone());
            }
            if !mid_path && word != "Self" && toks.get(i + 1) == Some(&Tok::Path) {
                let mut segs = vec![word.clone()];
                let mut j = i + 1;
                while toks.get(j) == Some(&Tok::Path)
                    && let Some(Tok::Ident(next)) = toks.get(j + 1)
                {
                    segs.push(next.clone());
                    j += 2;
                }
                scope.paths.push(segs);
            }
        }
        i += 1;
    }
    out
}

/// Keywords whose next identifier (after [`MODIFIERS`]) is the name of an item.
const DEFINING: &[&str] = &[
    "fn", "struct", "enum", "trait", "type", "const", "static", "union",
];

/// Words between a [`DEFINING`] keyword and the name (`const fn f`, `static mut X`).
const MODIFIERS: &[&str] = &["fn", "unsafe", "extern", "async", "mut"];

/// A token of code: an identifier (keywords included), `::`, or one other character.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tok {
    /// An identifier or keyword (numbers are dropped).
    Ident(String),
    /// `::`.
    Path,
    /// Any other non-space character.
    Punct(char),
}

/// The tokens of `code` (the output of [`code_only`]).
pub fn tokens(code: &str) -> Vec<Tok> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            if !c.is_ascii_digit() {
                out.push(Tok::Ident(chars[start..i].iter().collect()));
            }
            continue;
        }
        if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push(Tok::Path);
            i += 2;
            continue;
        }
        if !c.is_whitespace() {
            out.push(Tok::Punct(c));
        }
        i += 1;
    }
    out
}

/// `text` with comments, string literals and character literals blanked (newlines and
/// lifetimes kept).
pub fn code_only(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, from: &[char]| {
        out.extend(from.iter().map(|&c| if c == '\n' { '\n' } else { ' ' }));
    };
    let ident = |i: usize| i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_');
    let mut i = 0;
    while i < b.len() {
        let (c, next) = (b[i], b.get(i + 1).copied());
        let end = if c == '/' && next == Some('/') {
            (i..b.len()).find(|&j| b[j] == '\n').unwrap_or(b.len())
        } else if c == '/' && next == Some('*') {
            block_comment_end(&b, i)
        } else if (c == 'r' || (c == 'b' && next == Some('r'))) && !ident(i) {
            raw_string_end(&b, i + 1 + usize::from(c == 'b')).unwrap_or(i)
        } else if c == '"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != '"' {
                j += if b[j] == '\\' { 2 } else { 1 };
            }
            (j + 1).min(b.len())
        } else if c == '\'' && next == Some('\\') {
            (i + 2..b.len())
                .find(|&j| b[j] == '\'')
                .map_or(b.len(), |j| j + 1)
        } else if c == '\'' && b.get(i + 2) == Some(&'\'') {
            i + 3
        } else {
            i
        };
        if end > i {
            blank(&mut out, &b[i..end]);
            i = end;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The end (exclusive) of the block comment opening at `i`; block comments nest.
fn block_comment_end(b: &[char], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < b.len() {
        if b[i] == '/' && b.get(i + 1) == Some(&'*') {
            depth += 1;
            i += 2;
        } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    b.len()
}

/// The end (exclusive) of a raw string whose `#`s or quote start at `i` (after `r`/`br`),
/// or `None` when this is no raw string (`r#ident`, a plain `r`).
fn raw_string_end(b: &[char], i: usize) -> Option<usize> {
    let hashes = b[i..].iter().take_while(|&&c| c == '#').count();
    if b.get(i + hashes) != Some(&'"') {
        return None;
    }
    let mut j = i + hashes + 1;
    while j < b.len() {
        if b[j] == '"'
            && b[j + 1..]
                .iter()
                .take(hashes)
                .filter(|&&c| c == '#')
                .count()
                == hashes
        {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(b.len())
}

/// The index of the bracket closing the one at `open` (`toks.len()` when unclosed).
fn matching(toks: &[Tok], open: usize) -> usize {
    let mut depth = 0usize;
    for (j, t) in toks.iter().enumerate().skip(open) {
        match t {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    toks.len()
}

/// Whether an attribute's tokens (inside `#[…]`) are a `cfg` that holds only under test:
/// `cfg(test)`, `cfg(all(test, …))`; not `cfg(not(test))`.
fn is_cfg_test(attr: &[Tok]) -> bool {
    let word = |t: &Tok, w: &str| matches!(t, Tok::Ident(x) if x == w);
    attr.first().is_some_and(|t| word(t, "cfg"))
        && attr.iter().any(|t| word(t, "test"))
        && !attr.iter().any(|t| word(t, "not") || word(t, "any"))
}

/// The index just past the item starting at `i`: its `;`, or the `}` closing its first
/// block, or (for a field or an arm) the bracket that closes the enclosing one.
fn skip_item(toks: &[Tok], i: usize) -> usize {
    let mut j = i;
    while j < toks.len() {
        match toks[j] {
            Tok::Punct(';') => return j + 1,
            Tok::Punct('(' | '[' | '{') => {
                let close = matching(toks, j);
                if toks[j] == Tok::Punct('{') {
                    return close + 1;
                }
                j = close + 1;
                continue;
            }
            Tok::Punct(')' | ']' | '}') => return j,
            _ => {}
        }
        j += 1;
    }
    toks.len()
}

/// Whether the `use` after `before` is public: `pub use`, `pub(crate) use`, ….
fn is_public(before: &[Tok]) -> bool {
    match before.last() {
        Some(Tok::Ident(w)) => w == "pub",
        Some(Tok::Punct(')')) => {
            let open = before.iter().rposition(|t| *t == Tok::Punct('('));
            open.is_some_and(|o| o > 0 && before[o - 1] == Tok::Ident("pub".into()))
        }
        _ => false,
    }
}

/// Expands a use tree (the tokens between `use` and `;`) under `prefix` into
/// `(path, bound name)` pairs; a glob binds no name.
fn use_tree(toks: &[Tok], prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, Option<String>)>) {
    let depth = prefix.len();
    let mut i = usize::from(toks.first() == Some(&Tok::Path)); // `use ::std::…`
    while let Some(Tok::Ident(seg)) = toks.get(i) {
        if seg == "as" {
            break;
        }
        prefix.push(seg.clone());
        i += 1;
        if toks.get(i) == Some(&Tok::Path) {
            i += 1;
        } else {
            break;
        }
    }
    match toks.get(i) {
        Some(Tok::Punct('{')) => {
            let close = matching(toks, i);
            let inner = &toks[i + 1..close.min(toks.len())];
            let mut level = 0usize;
            let mut start = 0;
            for (j, t) in inner.iter().enumerate() {
                match t {
                    Tok::Punct('{') => level += 1,
                    Tok::Punct('}') => level -= 1,
                    Tok::Punct(',') if level == 0 => {
                        use_tree(&inner[start..j], prefix, out);
                        start = j + 1;
                    }
                    _ => {}
                }
            }
            use_tree(&inner[start..], prefix, out);
        }
        Some(Tok::Punct('*')) => out.push((prefix.clone(), None)),
        _ if prefix.len() > depth => {
            if prefix.last().is_some_and(|s| s == "self") {
                prefix.pop();
            }
            let alias = match (toks.get(i), toks.get(i + 1)) {
                (Some(Tok::Ident(w)), Some(Tok::Ident(name))) if w == "as" => name.clone(),
                _ => prefix.last().cloned().unwrap_or_default(),
            };
            out.push((prefix.clone(), Some(alias)));
        }
        _ => {}
    }
    prefix.truncate(depth);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn comments_strings_and_chars_are_blanked_and_lifetimes_kept() {
        let text = "a // crate::x\nb /* crate::y /* nested */ */ c \"crate::z\\\"\" \
                    r#\"crate::w\"# '\\'' 'q' fn f<'a>(x: &'a u8) {}";
        let code = code_only(text);
        assert!(!code.contains("crate"), "{code}");
        assert_eq!(code.lines().count(), 2);
        assert!(code.contains("fn f<'a>(x: &'a u8) {}"), "{code}");
    }

    #[test]
    fn use_trees_expand_groups_self_aliases_and_globs() {
        let scan = scan(
            "pub(crate) use crate::{a::{self, B as C}, d::*};\nuse ::std::io;\n\
             use super::e::F;",
            &[],
        );
        let uses = &scan.scopes[&vec![]].uses;
        let got: Vec<(Vec<String>, Option<&str>, bool)> = uses
            .iter()
            .map(|u| (u.segs.clone(), u.name.as_deref(), u.public))
            .collect();
        assert_eq!(
            got,
            [
                (s(&["crate", "a"]), Some("a"), true),
                (s(&["crate", "a", "B"]), Some("C"), true),
                (s(&["crate", "d"]), None, true),
                (s(&["std", "io"]), Some("io"), false),
                (s(&["super", "e", "F"]), Some("F"), false),
            ]
        );
    }

    #[test]
    fn code_paths_idents_items_and_modules_are_recorded() {
        let text = "mod child;\npub mod inline { fn g() { super::h(); } }\n\
                    const fn f() -> crate::a::B { x.field; Self::new(); std::mem::take(y) }\n\
                    static mut COUNT: u8 = 0;\nmacro_rules! m { () => {} }";
        let scan = scan(text, &s(&["top"]));
        assert_eq!(scan.children, [(s(&["top"]), "child".to_owned())]);
        let top = &scan.scopes[&s(&["top"])];
        assert_eq!(
            top.paths,
            [s(&["crate", "a", "B"]), s(&["std", "mem", "take"])]
        );
        for name in ["f", "COUNT", "m", "child", "inline"] {
            assert!(top.defined.contains(name), "{name}");
        }
        assert!(top.idents.contains("x") && !top.idents.contains("field"));
        let inline = &scan.scopes[&s(&["top", "inline"])];
        assert_eq!(inline.paths, [s(&["super", "h"])]);
    }

    #[test]
    fn test_only_code_is_skipped() {
        let text = "#[cfg(test)]\nmod tests { use crate::a::B; }\n\
                    #[cfg(all(test, target_arch = \"x86_64\"))]\n#[allow(dead_code)]\nmod simd_tests;\n\
                    #[cfg(not(test))]\nuse crate::c::D;\n#[cfg(test)]\nfn helper() { crate::e::f(); }\n\
                    fn kept() { crate::g::h(); }";
        let scan = scan(text, &[]);
        assert!(scan.children.is_empty());
        let root = &scan.scopes[&vec![]];
        assert_eq!(root.uses.len(), 1);
        assert_eq!(root.uses[0].segs, s(&["crate", "c", "D"]));
        assert_eq!(root.paths, [s(&["crate", "g", "h"])]);
        assert!(!scan.scopes.contains_key(&s(&["tests"])));
    }
}
