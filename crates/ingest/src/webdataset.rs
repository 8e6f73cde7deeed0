//! WebDataset tar shards as records, for `ffcv write webdataset`.
//!
//! The inputs (paths, glob patterns, brace lists: [`expand_inputs`]) become a sorted list
//! of tar files; [`Shards::scan`] reads every tar header (seeking over the data, so a scan
//! reads about 512 bytes per member) and groups the members into records by WebDataset's
//! rule: a member's key is its path up to the first dot of its file name and its
//! extension the rest, lowercased (`train/0001.seg.png` → key `train/0001`, extension
//! `seg.png`); consecutive members with the same key form one record. Members whose
//! file name has no dot, and entries that are not regular files, belong to no record
//! (WebDataset ignores them too), and so do top-level `__NAME__` files (its metadata).
//! Shards are plain tar files (compressed ones are refused). A record keeps only where
//! its members' bytes are; [`Shards::read`] reads them with positional reads, checked
//! against the file's length.

use std::collections::BTreeSet;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Most names one brace list may stand for, so that `{0..99999999999}` is refused
/// instead of filling memory.
const MAX_BRACE_NAMES: usize = 1_000_000;

/// One member of a record: its extension and where its bytes are in the shard.
#[derive(Debug, Clone)]
pub struct Member {
    /// The extension, lowercased (`jpg`, `cls`, `seg.png`).
    pub ext: String,
    /// Offset of the member's data in the tar file.
    pub offset: u64,
    /// Length of the member's data.
    pub len: u64,
}

/// One sample of a shard: the members sharing a key.
#[derive(Debug, Clone)]
pub struct Record {
    /// The shard (an index into [`Shards::paths`]).
    pub shard: usize,
    /// The key (`__key__` in WebDataset).
    pub key: String,
    /// The members in tar order.
    pub members: Vec<Member>,
    /// Why the record cannot be used (a repeated extension, a truncated member), found
    /// while scanning.
    pub problem: Option<String>,
}

impl Record {
    /// The member with extension `ext`.
    pub fn member(&self, ext: &str) -> Option<&Member> {
        self.members.iter().find(|m| m.ext == ext)
    }
}

/// A shard whose tar structure broke off: its records up to there were kept.
#[derive(Debug, Clone)]
pub struct BrokenShard {
    /// The shard (an index into [`Shards::paths`]).
    pub shard: usize,
    /// What went wrong and where.
    pub reason: String,
}

/// Every record of a list of shards, in shard order then tar order.
#[derive(Debug)]
pub struct Shards {
    /// The tar files, sorted.
    pub paths: Vec<PathBuf>,
    /// The records.
    pub records: Vec<Record>,
    /// Shards whose tar structure is broken (only with `keep_going`; otherwise the scan
    /// fails on the first one).
    pub broken: Vec<BrokenShard>,
}

/// The error of shard `path`, for the command line (exit status 1).
pub fn shard_error(path: &Path, reason: impl Into<String>) -> Error {
    Error::WebDataset {
        // A fetched object is named by its URL, not its staging copy.
        path: PathBuf::from(crate::object_io::display_name(path)),
        reason: reason.into(),
    }
}

/// The tar files `inputs` stand for, sorted byte-wise and without repeats.
///
/// Each input is first expanded as a shell brace list: `{a,b}` (alternatives, nested
/// lists allowed) and `{000..009}` (a numeric range, zero-padded to the wider bound when
/// a bound has a leading zero; it may count down). Each resulting name that holds `*`,
/// `?` or `[` and is not itself an existing file is a glob pattern, which must match at
/// least one file; any other name is taken as it is (a missing file fails later, when it
/// is opened).
pub fn expand_inputs(inputs: &[String]) -> Result<Vec<PathBuf>> {
    let mut out = BTreeSet::new();
    let mut urls = BTreeSet::new();
    for input in inputs {
        let names = expand_braces(input)
            .map_err(|reason| Error::Usage(format!("input `{input}`: {reason}")))?;
        for name in names {
            if crate::object_io::is_remote(&name) {
                urls.extend(crate::object_io::expand_remote(&name)?);
                continue;
            }
            let is_pattern = name.contains(['*', '?', '[']) && !Path::new(&name).exists();
            if !is_pattern {
                out.insert(PathBuf::from(name));
                continue;
            }
            let bad = |reason: String| Error::Usage(format!("input `{name}`: {reason}"));
            let matches = glob::glob(&name).map_err(|e| bad(format!("bad pattern: {e}")))?;
            let mut any = false;
            for m in matches {
                let m = m.map_err(|e| bad(format!("cannot read a match: {e}")))?;
                any = true;
                out.insert(m);
            }
            if !any {
                return Err(shard_error(Path::new(&name), "the pattern matches no file"));
            }
        }
    }
    if out.is_empty() && urls.is_empty() {
        return Err(Error::Usage("no input shards given".into()));
    }
    // Objects are fetched whole before any is read (the readers reach members at
    // random), in URL order, after the local files.
    let mut paths: Vec<PathBuf> = out.into_iter().collect();
    let urls: Vec<String> = urls.into_iter().collect();
    paths.extend(crate::object_io::fetch_all(&urls)?);
    Ok(paths)
}

/// The names a brace list stands for, in the order written (see [`expand_inputs`]). A
/// `{` without a matching `}`, or braces around a single word, stay as they are.
pub fn expand_braces(pattern: &str) -> std::result::Result<Vec<String>, String> {
    let mut names = Vec::new();
    expand_into(pattern, &mut names)?;
    Ok(names)
}

fn expand_into(pattern: &str, out: &mut Vec<String>) -> std::result::Result<(), String> {
    let Some((open, close)) = first_group(pattern) else {
        out.push(pattern.to_owned());
        return check_count(out.len());
    };
    let (head, body, tail) = (
        &pattern[..open],
        &pattern[open + 1..close],
        &pattern[close + 1..],
    );
    let alternatives = match split_top_level(body) {
        parts if parts.len() > 1 => parts,
        _ => match numeric_range(body)? {
            Some(range) => range,
            // `{word}` is no list: keep the braces, expand what follows.
            None => {
                let mut rest = Vec::new();
                expand_into(tail, &mut rest)?;
                for r in rest {
                    out.push(format!("{head}{{{body}}}{r}"));
                    check_count(out.len())?;
                }
                return Ok(());
            }
        },
    };
    for alternative in alternatives {
        expand_into(&format!("{head}{alternative}{tail}"), out)?;
    }
    Ok(())
}

fn check_count(n: usize) -> std::result::Result<(), String> {
    if n > MAX_BRACE_NAMES {
        return Err(format!(
            "the brace lists stand for more than {MAX_BRACE_NAMES} names"
        ));
    }
    Ok(())
}

/// The byte positions of the first `{` that has a matching `}`, and of that `}`.
fn first_group(pattern: &str) -> Option<(usize, usize)> {
    let bytes = pattern.as_bytes();
    for (open, &b) in bytes.iter().enumerate() {
        if b != b'{' {
            continue;
        }
        let mut depth = 0usize;
        for (i, &c) in bytes.iter().enumerate().skip(open) {
            match c {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some((open, i));
                    }
                }
                _ => {}
            }
        }
    }
    None
}

/// `body` split at the commas outside nested braces.
fn split_top_level(body: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in body.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(body[start..i].to_owned());
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(body[start..].to_owned());
    parts
}

/// `A..B` with decimal integers as the numbers from A to B; `None` for any other text.
fn numeric_range(body: &str) -> std::result::Result<Option<Vec<String>>, String> {
    let Some((a, b)) = body.split_once("..") else {
        return Ok(None);
    };
    let number = |s: &str| {
        let digits = s.strip_prefix('-').unwrap_or(s);
        (!digits.is_empty() && digits.bytes().all(|c| c.is_ascii_digit()))
            .then(|| s.parse::<i64>().ok())
            .flatten()
    };
    let (Some(from), Some(to)) = (number(a), number(b)) else {
        return Ok(None);
    };
    let padded =
        |s: &str| s.trim_start_matches('-').len() > 1 && s.trim_start_matches('-').starts_with('0');
    let width = if padded(a) || padded(b) {
        a.len().max(b.len())
    } else {
        0
    };
    let count = from.abs_diff(to).saturating_add(1);
    if count > MAX_BRACE_NAMES as u64 {
        return Err(format!(
            "{{{body}}} stands for {count} names, more than {MAX_BRACE_NAMES}"
        ));
    }
    let step: i64 = if to >= from { 1 } else { -1 };
    Ok(Some(
        (0..count as i64)
            .map(|k| format!("{:0width$}", from + k * step))
            .collect(),
    ))
}

/// WebDataset's split of a member path into key and extension: the file name up to its
/// first dot (with the folders before it) and the rest, lowercased; `None` when the file
/// name has no dot.
pub fn key_and_ext(path: &str) -> Option<(&str, String)> {
    let name_start = path.rfind('/').map_or(0, |i| i + 1);
    let dot = path[name_start..].find('.')? + name_start;
    if dot == name_start {
        // `.hidden` has an empty key: WebDataset's rule needs at least one character.
        return None;
    }
    Some((&path[..dot], path[dot + 1..].to_ascii_lowercase()))
}

impl Shards {
    /// Scans every tar file in `paths` (see the module docs). A tar structure that breaks
    /// off (a bad header, a member running past the end of the file) fails the scan
    /// naming the shard and the byte where it broke; with `keep_going` the shard's
    /// records before that point are kept, the record being read is dropped, and the
    /// shard is listed in [`Shards::broken`]. A record repeating an extension is kept
    /// with its [`Record::problem`] set.
    pub fn scan(paths: Vec<PathBuf>, keep_going: bool) -> Result<Shards> {
        let mut records = Vec::new();
        let mut broken = Vec::new();
        for (shard, path) in paths.iter().enumerate() {
            if let Err(reason) = scan_one(shard, path, &mut records) {
                if !keep_going {
                    return Err(shard_error(path, reason));
                }
                broken.push(BrokenShard { shard, reason });
            }
        }
        Ok(Shards {
            paths,
            records,
            broken,
        })
    }

    /// The bytes of `member` of `record`.
    pub fn read(&self, record: &Record, member: &Member) -> std::result::Result<Vec<u8>, String> {
        let path = &self.paths[record.shard];
        let file = File::open(path).map_err(|e| format!("cannot open: {e}"))?;
        let size = file
            .metadata()
            .map_err(|e| format!("cannot stat: {e}"))?
            .len();
        // The scan checked this against the file as it was; a file cut short since then
        // is an error, not an allocation past its end.
        if member
            .offset
            .checked_add(member.len)
            .is_none_or(|end| end > size)
        {
            return Err(format!(
                "member `{}` ({} bytes at byte {}) runs past the end of the file ({size} bytes)",
                member.ext, member.len, member.offset
            ));
        }
        let len = usize::try_from(member.len).map_err(|_| "member too large".to_owned())?;
        let mut bytes = vec![0u8; len];
        file.read_exact_at(&mut bytes, member.offset)
            .map_err(|e| format!("cannot read member `{}`: {e}", member.ext))?;
        Ok(bytes)
    }

    /// The shard file of `record`.
    pub fn path_of(&self, record: &Record) -> &Path {
        &self.paths[record.shard]
    }
}

/// Appends the records of one shard; on a broken tar structure returns why, having
/// appended the complete records before it.
fn scan_one(
    shard: usize,
    path: &Path,
    records: &mut Vec<Record>,
) -> std::result::Result<(), String> {
    let file = File::open(path).map_err(|e| format!("cannot open: {e}"))?;
    let size = file
        .metadata()
        .map_err(|e| format!("cannot stat: {e}"))?
        .len();
    let mut magic = [0u8; 2];
    if file.read_exact_at(&mut magic, 0).is_ok() && magic == [0x1f, 0x8b] {
        return Err("a gzip-compressed shard: only plain tar files are read (gunzip it)".into());
    }
    let mut archive = tar::Archive::new(&file);
    let entries = archive
        .entries_with_seek()
        .map_err(|e| format!("not a tar file: {e}"))?;
    let mut current: Option<Record> = None;
    let mut last_end = 0u64;
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                let at = current.as_ref().map_or(String::new(), |r| {
                    format!(" (in record `{}`, which is dropped)", r.key)
                });
                let what = if last_end == 0 && current.is_none() {
                    "not a tar file (no valid header at byte 0)".to_owned()
                } else {
                    format!("bad tar member after byte {last_end}{at}")
                };
                return Err(format!("{what}: {}", printable(&e.to_string())));
            }
        };
        let (offset, len) = (entry.raw_file_position(), entry.size());
        let end = offset.checked_add(len).filter(|&end| end <= size);
        let Some(end) = end else {
            let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
            // The record before this member is complete when the member starts another.
            let key = key_and_ext(&name).map(|(key, _)| key.to_owned());
            if let Some(record) = current.take_if(|r| Some(&r.key) != key.as_ref()) {
                records.push(record);
            }
            let dropped = current.as_ref().map_or(String::new(), |r| {
                format!(" (record `{}` is dropped)", r.key)
            });
            return Err(format!(
                "member `{name}` ({len} bytes at byte {offset}) runs past the end of the file \
                 ({size} bytes){dropped}"
            ));
        };
        last_end = end;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        // `__meta__` files at the top level are WebDataset's metadata, not samples.
        if !name.contains('/') && name.starts_with("__") && name.ends_with("__") {
            continue;
        }
        let Some((key, ext)) = key_and_ext(&name) else {
            continue;
        };
        let member = Member { ext, offset, len };
        match &mut current {
            Some(record) if record.key == key => {
                if record.member(&member.ext).is_some() && record.problem.is_none() {
                    record.problem = Some(format!("two members with extension `{}`", member.ext));
                }
                record.members.push(member);
            }
            _ => {
                records.extend(current.take());
                current = Some(Record {
                    shard,
                    key: key.to_owned(),
                    members: vec![member],
                    problem: None,
                });
            }
        }
    }
    records.extend(current);
    Ok(())
}

/// `text` with characters that are not printable ASCII as `?`, cut at 120 characters: the
/// tar crate quotes the header bytes it could not parse, which may be any bytes.
fn printable(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(120)
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .collect();
    if text.chars().count() > 120 {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brace_lists_expand_in_order() {
        assert_eq!(
            expand_braces("s-{000..003}.tar").unwrap(),
            ["s-000.tar", "s-001.tar", "s-002.tar", "s-003.tar"]
        );
        assert_eq!(
            expand_braces("{b,a}/{1..2}").unwrap(),
            ["b/1", "b/2", "a/1", "a/2"]
        );
        assert_eq!(expand_braces("{x,{y,z}w}").unwrap(), ["x", "yw", "zw"]);
        assert_eq!(expand_braces("{3..1}").unwrap(), ["3", "2", "1"]);
        assert_eq!(expand_braces("a{b}c{1,2}").unwrap(), ["a{b}c1", "a{b}c2"]);
        assert_eq!(expand_braces("open{brace").unwrap(), ["open{brace"]);
        assert!(expand_braces("{0..99999999}").is_err());
    }

    #[test]
    fn keys_are_cut_at_the_first_dot_of_the_file_name() {
        assert_eq!(
            key_and_ext("a/b.c/0001.seg.PNG"),
            Some(("a/b.c/0001", "seg.png".into()))
        );
        assert_eq!(key_and_ext("0001.jpg"), Some(("0001", "jpg".into())));
        assert_eq!(key_and_ext("dir/noext"), None);
        assert_eq!(key_and_ext("dir/.hidden"), None);
    }
}
