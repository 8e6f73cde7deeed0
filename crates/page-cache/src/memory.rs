//! How much memory this process may use: the machine's (`/proc/meminfo`) and its control
//! group's limit (cgroup v2 `memory.max`/`memory.high`, v1 `memory.limit_in_bytes`), the
//! smaller one binding. A container or Kubernetes pod sees the host's `/proc/meminfo`, so
//! without the cgroup a budget taken from it would be many times what the kernel lets the
//! process keep before it kills it.
//!
//! Every reader is split in two: a pure parser over the text of the kernel files (tested on
//! recorded contents for v1, v2 and nested groups) and a thin function that reads them.

use std::path::{Path, PathBuf};

/// Which cgroup hierarchy the limit came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    /// The legacy hierarchy, with a `memory` controller of its own.
    V1,
    /// The unified hierarchy (`cgroup2`).
    V2,
}

/// The memory controller of this process's control group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupMemory {
    /// v1 or v2.
    pub version: CgroupVersion,
    /// The group's directory (under the hierarchy's mount point).
    pub dir: PathBuf,
    /// The lowest limit of the group and its ancestors: `memory.max` and `memory.high` in
    /// v2 (the kernel throttles and reclaims hard at `high`), `memory.limit_in_bytes` in
    /// v1; `None` when none is set ("max", or v1's "unlimited" value).
    pub limit: Option<u64>,
    /// The group's usage (`memory.current` / `memory.usage_in_bytes`), page cache included.
    pub usage: Option<u64>,
    /// The group's inactive file pages (`inactive_file` in `memory.stat`, v1's
    /// `total_inactive_file`): page cache the kernel reclaims first, counted as available as
    /// `/proc/meminfo`'s `MemAvailable` counts it.
    pub reclaimable: u64,
    /// The least room of the group's limited ancestors (each one's limit minus its own
    /// usage net of its inactive file pages): siblings charge an ancestor too, so its room
    /// can be less than the lowest limit minus this group's usage. `None` when no ancestor
    /// has a limit.
    pub ancestors_room: Option<u64>,
}

impl CgroupMemory {
    /// What the group can still take: limit minus usage, reclaimable page cache counted as
    /// free, and no more than any limited ancestor's room. `None` without a limit.
    pub fn available(&self) -> Option<u64> {
        let limit = self.limit?;
        let own = limit.saturating_sub(net_usage(self.usage, self.reclaimable));
        Some(self.ancestors_room.map_or(own, |room| room.min(own)))
    }
}

/// Usage less the reclaimable page cache.
fn net_usage(usage: Option<u64>, reclaimable: u64) -> u64 {
    let usage = usage.unwrap_or(0);
    usage.saturating_sub(reclaimable.min(usage))
}

/// The least `limit - net usage` over the strict ancestors of `dir` up to and including
/// `top` that have a limit (`room_of` gives it per directory).
fn ancestors_room(dir: &Path, top: &Path, room_of: impl Fn(&Path) -> Option<u64>) -> Option<u64> {
    if dir == top || !dir.starts_with(top) {
        return None;
    }
    walk_up(dir.parent()?, top, room_of)
}

/// The machine's memory and, where one applies, the cgroup limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryFacts {
    /// `MemTotal` of `/proc/meminfo`.
    pub physical_total: u64,
    /// `MemAvailable` (or `MemFree` on old kernels).
    pub physical_available: u64,
    /// The memory controller of this process's group, when one is visible.
    pub cgroup: Option<CgroupMemory>,
}

/// Which of the two figures limits the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryBound {
    /// The machine's memory.
    Physical,
    /// The control group's limit.
    Cgroup,
}

impl MemoryFacts {
    /// The memory this process may use: the smaller of physical memory and the cgroup limit.
    pub fn limit(&self) -> u64 {
        match self.cgroup.as_ref().and_then(|c| c.limit) {
            Some(limit) => limit.min(self.physical_total),
            None => self.physical_total,
        }
    }

    /// What it can still take: the smaller of `MemAvailable` and the cgroup's room.
    pub fn available(&self) -> u64 {
        match self.cgroup.as_ref().and_then(CgroupMemory::available) {
            Some(room) => room.min(self.physical_available),
            None => self.physical_available,
        }
    }

    /// Which figure binds (the cgroup on a tie: it is the one the kernel enforces on us).
    pub fn bound(&self) -> MemoryBound {
        match self.cgroup.as_ref().and_then(|c| c.limit) {
            Some(limit) if limit <= self.physical_total => MemoryBound::Cgroup,
            _ => MemoryBound::Physical,
        }
    }
}

/// The memory facts of this process (Linux); `None` where `/proc/meminfo` is unreadable.
pub fn memory_facts() -> Option<MemoryFacts> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let (physical_total, physical_available) = parse_meminfo(&meminfo)?;
    let cgroup = match (
        std::fs::read_to_string("/proc/self/cgroup"),
        std::fs::read_to_string("/proc/self/mountinfo"),
    ) {
        (Ok(groups), Ok(mounts)) => {
            cgroup_memory(&groups, &mounts, |p| std::fs::read_to_string(p).ok())
        }
        _ => None,
    };
    Some(MemoryFacts {
        physical_total,
        physical_available,
        cgroup,
    })
}

/// Bytes of memory available to new allocations: `MemAvailable` of `/proc/meminfo`, capped
/// by what this process's cgroup can still take; `None` where the OS does not say. This is
/// the process cache's default memory budget.
pub fn available_memory() -> Option<u64> {
    memory_facts().map(|f| f.available())
}

/// `MemTotal` and `MemAvailable` (kB in the file) as bytes; `MemFree` stands in for
/// `MemAvailable` on kernels too old to have it.
fn parse_meminfo(text: &str) -> Option<(u64, u64)> {
    let field = |name: &str| -> Option<u64> {
        let line = text
            .lines()
            .find(|l| l.split_once(':').is_some_and(|(k, _)| k.trim() == name))?;
        let mut words = line.split_once(':')?.1.split_whitespace();
        let value: u64 = words.next()?.parse().ok()?;
        let unit = match words.next() {
            Some("kB") => 1024,
            None => 1,
            Some(_) => return None,
        };
        value.checked_mul(unit)
    };
    let total = field("MemTotal")?;
    let available = field("MemAvailable").or_else(|| field("MemFree"))?;
    Some((total, available.min(total)))
}

/// A v1 limit at or above this is the kernel's "no limit" (`PAGE_COUNTER_MAX` pages, about
/// 2^63 bytes rounded down to a page); anything that large limits nothing real.
const V1_UNLIMITED: u64 = 1 << 62;

/// Finds this process's memory cgroup from the texts of `/proc/self/cgroup` and
/// `/proc/self/mountinfo`, and reads its files (and its ancestors' up to the mount point)
/// through `read`. v2 is preferred when both hierarchies are mounted with a memory
/// controller, as the kernel uses only one of them for a controller.
pub fn cgroup_memory(
    proc_cgroup: &str,
    mountinfo: &str,
    read: impl Fn(&Path) -> Option<String>,
) -> Option<CgroupMemory> {
    let mounts = parse_mountinfo(mountinfo);
    let mut v1 = None;
    let mut v2 = None;
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            v2 = Some(path.to_owned());
        } else if controllers.split(',').any(|c| c == "memory") {
            v1 = Some(path.to_owned());
        }
    }
    let v2_dir = v2.and_then(|path| {
        let mount = mounts.iter().find(|m| m.fstype == "cgroup2")?;
        // A v2 hierarchy without the memory controller has no memory files to read.
        Some((mount.group_dir(&path), mount.point.clone()))
    });
    if let Some((dir, top)) = v2_dir
        && read(&dir.join("memory.current")).is_some()
    {
        let limit = walk_up(&dir, &top, |d| {
            [read(&d.join("memory.max")), read(&d.join("memory.high"))]
                .into_iter()
                .flatten()
                .filter_map(|t| parse_limit(&t))
                .min()
        });
        let stat = read(&dir.join("memory.stat")).unwrap_or_default();
        let ancestors_room = ancestors_room(&dir, &top, |d| {
            let limit = [read(&d.join("memory.max")), read(&d.join("memory.high"))]
                .into_iter()
                .flatten()
                .filter_map(|t| parse_limit(&t))
                .min()?;
            // The root of the hierarchy has no usage file: nothing to subtract there.
            let usage = read(&d.join("memory.current")).and_then(|t| t.trim().parse().ok());
            let stat = read(&d.join("memory.stat")).unwrap_or_default();
            let inactive = stat_value(&stat, "inactive_file").unwrap_or(0);
            Some(limit.saturating_sub(net_usage(usage, inactive)))
        });
        return Some(CgroupMemory {
            version: CgroupVersion::V2,
            limit,
            usage: read(&dir.join("memory.current")).and_then(|t| t.trim().parse().ok()),
            reclaimable: stat_value(&stat, "inactive_file").unwrap_or(0),
            ancestors_room,
            dir,
        });
    }
    let path = v1?;
    let mount = mounts
        .iter()
        .find(|m| m.fstype == "cgroup" && m.super_options.split(',').any(|o| o == "memory"))?;
    let dir = mount.group_dir(&path);
    let limit = walk_up(&dir, &mount.point, |d| {
        read(&d.join("memory.limit_in_bytes"))
            .and_then(|t| parse_limit(&t))
            .filter(|&l| l < V1_UNLIMITED)
    });
    let stat = read(&dir.join("memory.stat")).unwrap_or_default();
    let ancestors_room = ancestors_room(&dir, &mount.point, |d| {
        let limit = read(&d.join("memory.limit_in_bytes"))
            .and_then(|t| parse_limit(&t))
            .filter(|&l| l < V1_UNLIMITED)?;
        let usage = read(&d.join("memory.usage_in_bytes")).and_then(|t| t.trim().parse().ok());
        let stat = read(&d.join("memory.stat")).unwrap_or_default();
        let inactive = stat_value(&stat, "total_inactive_file")
            .or_else(|| stat_value(&stat, "inactive_file"))
            .unwrap_or(0);
        Some(limit.saturating_sub(net_usage(usage, inactive)))
    });
    Some(CgroupMemory {
        version: CgroupVersion::V1,
        limit,
        usage: read(&dir.join("memory.usage_in_bytes")).and_then(|t| t.trim().parse().ok()),
        reclaimable: stat_value(&stat, "total_inactive_file")
            .or_else(|| stat_value(&stat, "inactive_file"))
            .unwrap_or(0),
        ancestors_room,
        dir,
    })
}

/// The lowest `limit_of` over `dir` and its ancestors up to and including `top`: a child
/// can be no larger than its parent allows.
fn walk_up(dir: &Path, top: &Path, limit_of: impl Fn(&Path) -> Option<u64>) -> Option<u64> {
    let mut lowest: Option<u64> = None;
    let mut at = Some(dir);
    while let Some(d) = at {
        if let Some(l) = limit_of(d) {
            lowest = Some(lowest.map_or(l, |x| x.min(l)));
        }
        if d == top || !d.starts_with(top) {
            break;
        }
        at = d.parent();
    }
    lowest
}

/// A limit file's value: a byte count, or `max` (no limit).
fn parse_limit(text: &str) -> Option<u64> {
    match text.trim() {
        "max" => None,
        t => t.parse().ok(),
    }
}

/// The value of `key` in a `memory.stat` text (`key value` lines).
fn stat_value(stat: &str, key: &str) -> Option<u64> {
    stat.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// One line of `/proc/self/mountinfo`, the fields used here.
#[derive(Debug)]
struct Mount {
    /// The mount's root within its filesystem (field 4): in a cgroup namespace or a
    /// container that bind-mounts its group, the group path the mount starts at.
    root: String,
    /// Where it is mounted (field 5).
    point: PathBuf,
    /// The filesystem type (first field after the ` - ` separator).
    fstype: String,
    /// The super-block options (last field): v1 lists its controllers there.
    super_options: String,
}

impl Mount {
    /// The directory of the group at `path` (as `/proc/self/cgroup` names it) under this
    /// mount: the part of the path below the mount's root, joined to the mount point.
    fn group_dir(&self, path: &str) -> PathBuf {
        let root = self.root.trim_end_matches('/');
        let below = match path.strip_prefix(root) {
            Some(rest) if root.is_empty() || rest.is_empty() || rest.starts_with('/') => rest,
            // The group lies outside the mounted part (a namespace shows it as `/..`):
            // the mount point is the nearest directory we can read.
            _ => "",
        };
        let below = below.trim_start_matches('/');
        if below.is_empty() || below.split('/').any(|c| c == "..") {
            self.point.clone()
        } else {
            self.point.join(below)
        }
    }
}

/// The mounts of a `/proc/self/mountinfo` text; malformed lines are skipped.
fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let (head, tail) = line.split_once(" - ")?;
            let fields: Vec<&str> = head.split(' ').collect();
            let mut tail = tail.split(' ');
            let fstype = tail.next()?;
            let _source = tail.next()?;
            let super_options = tail.next().unwrap_or("");
            Some(Mount {
                root: unescape(fields.get(3)?),
                point: PathBuf::from(unescape(fields.get(4)?)),
                fstype: fstype.to_owned(),
                super_options: super_options.to_owned(),
            })
        })
        .collect()
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo` octal.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let code =
                (bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0');
            out.push(code);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A fake `/sys/fs/cgroup`: path -> contents.
    fn files(entries: &[(&str, &str)]) -> impl Fn(&Path) -> Option<String> {
        let map: HashMap<PathBuf, String> = entries
            .iter()
            .map(|(p, t)| (PathBuf::from(p), (*t).to_owned()))
            .collect();
        move |p: &Path| map.get(p).cloned()
    }

    const V2_MOUNTINFO: &str = "\
22 1 0:21 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
25 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
";

    #[test]
    fn parses_mem_total_and_available_in_kib() {
        let text = "MemTotal:       24000000 kB\nMemFree:  1 kB\nMemAvailable:   2048 kB\n";
        assert_eq!(parse_meminfo(text), Some((24000000 * 1024, 2048 * 1024)));
        assert_eq!(
            parse_meminfo("MemTotal: 8 kB\nMemFree: 3 kB\n"),
            Some((8192, 3072))
        );
        assert_eq!(parse_meminfo("MemFree: 5 kB\n"), None);
        assert_eq!(parse_meminfo("MemTotal: x kB\nMemAvailable: 1 kB\n"), None);
        assert_eq!(parse_meminfo("MemTotal: 7 MB\nMemAvailable: 1 kB\n"), None);
    }

    #[test]
    fn v2_limit_usage_and_reclaimable_cache() {
        let read = files(&[
            ("/sys/fs/cgroup/user.slice/job/memory.max", "1073741824\n"),
            ("/sys/fs/cgroup/user.slice/job/memory.high", "max\n"),
            (
                "/sys/fs/cgroup/user.slice/job/memory.current",
                "600000000\n",
            ),
            (
                "/sys/fs/cgroup/user.slice/job/memory.stat",
                "anon 100000000\nfile 500000000\ninactive_file 400000000\nactive_file 100\n",
            ),
            ("/sys/fs/cgroup/user.slice/memory.max", "max\n"),
        ]);
        let c = cgroup_memory("0::/user.slice/job\n", V2_MOUNTINFO, read).unwrap();
        assert_eq!(c.version, CgroupVersion::V2);
        assert_eq!(c.dir, PathBuf::from("/sys/fs/cgroup/user.slice/job"));
        assert_eq!(c.limit, Some(1 << 30));
        assert_eq!(c.usage, Some(600_000_000));
        assert_eq!(c.reclaimable, 400_000_000);
        // 1 GiB - (600 MB used - 400 MB reclaimable cache).
        assert_eq!(c.available(), Some((1 << 30) - 200_000_000));
        let facts = MemoryFacts {
            physical_total: 24 << 30,
            physical_available: 23 << 30,
            cgroup: Some(c),
        };
        assert_eq!(facts.limit(), 1 << 30);
        assert_eq!(facts.available(), (1 << 30) - 200_000_000);
        assert_eq!(facts.bound(), MemoryBound::Cgroup);
    }

    #[test]
    fn v2_nested_groups_take_the_lowest_ancestor_limit_and_high() {
        let read = files(&[
            ("/sys/fs/cgroup/a/b/c/memory.max", "max"),
            ("/sys/fs/cgroup/a/b/c/memory.current", "10"),
            ("/sys/fs/cgroup/a/b/memory.max", "5000"),
            ("/sys/fs/cgroup/a/b/memory.high", "4000"),
            ("/sys/fs/cgroup/a/memory.max", "9000"),
        ]);
        let c = cgroup_memory("0::/a/b/c", V2_MOUNTINFO, read).unwrap();
        assert_eq!(c.limit, Some(4000));
        assert_eq!(c.available(), Some(3990));
    }

    #[test]
    fn an_ancestor_charged_by_siblings_has_less_room_than_its_limit_minus_our_usage() {
        // b's limit binds (4000): c uses 10, but b's children together use 3500 (1000 of
        // it inactive page cache), so b has 4000 - 2500 = 1500 left, not 3990.
        let read = files(&[
            ("/sys/fs/cgroup/a/b/c/memory.max", "max"),
            ("/sys/fs/cgroup/a/b/c/memory.current", "10"),
            ("/sys/fs/cgroup/a/b/memory.high", "4000"),
            ("/sys/fs/cgroup/a/b/memory.current", "3500"),
            (
                "/sys/fs/cgroup/a/b/memory.stat",
                "anon 2500\ninactive_file 1000\n",
            ),
            ("/sys/fs/cgroup/a/memory.max", "9000"),
            ("/sys/fs/cgroup/a/memory.current", "8800"),
        ]);
        let c = cgroup_memory("0::/a/b/c", V2_MOUNTINFO, read).unwrap();
        assert_eq!(c.limit, Some(4000));
        // a: 9000 - 8800 = 200 is the least room of all.
        assert_eq!(c.ancestors_room, Some(200));
        assert_eq!(c.available(), Some(200));
        // v1 the same way: the parent's usage counts its whole subtree.
        let read = files(&[
            (
                "/sys/fs/cgroup/memory/job/task/memory.limit_in_bytes",
                "9223372036854771712",
            ),
            (
                "/sys/fs/cgroup/memory/job/task/memory.usage_in_bytes",
                "100",
            ),
            ("/sys/fs/cgroup/memory/job/memory.limit_in_bytes", "1000"),
            ("/sys/fs/cgroup/memory/job/memory.usage_in_bytes", "900"),
            (
                "/sys/fs/cgroup/memory/job/memory.stat",
                "total_inactive_file 300\n",
            ),
        ]);
        let c = cgroup_memory("4:memory:/job/task", V1_MOUNTINFO, read).unwrap();
        assert_eq!(c.limit, Some(1000));
        assert_eq!(c.ancestors_room, Some(400));
        assert_eq!(c.available(), Some(400));
    }

    #[test]
    fn v2_max_everywhere_is_no_limit_and_physical_binds() {
        let read = files(&[
            ("/sys/fs/cgroup/svc/memory.max", "max\n"),
            ("/sys/fs/cgroup/svc/memory.high", "max\n"),
            ("/sys/fs/cgroup/svc/memory.current", "123\n"),
        ]);
        let c = cgroup_memory("0::/svc\n", V2_MOUNTINFO, read).unwrap();
        assert_eq!(c.limit, None);
        assert_eq!(c.available(), None);
        let facts = MemoryFacts {
            physical_total: 1000,
            physical_available: 700,
            cgroup: Some(c),
        };
        assert_eq!((facts.limit(), facts.available()), (1000, 700));
        assert_eq!(facts.bound(), MemoryBound::Physical);
    }

    #[test]
    fn v2_root_group_and_a_container_namespace_read_the_mount_point() {
        // Inside a container with its own cgroup namespace, the group is "/" and the
        // mount's root is "/": its files are at the mount point itself.
        let read = files(&[
            ("/sys/fs/cgroup/memory.max", "2147483648"),
            ("/sys/fs/cgroup/memory.current", "0"),
        ]);
        let c = cgroup_memory("0::/\n", V2_MOUNTINFO, &read).unwrap();
        assert_eq!(c.dir, PathBuf::from("/sys/fs/cgroup"));
        assert_eq!(c.limit, Some(2 << 30));
        // A namespace that hides the group's path shows it as "/.." paths.
        let c = cgroup_memory("0::/../../docker-1\n", V2_MOUNTINFO, &read).unwrap();
        assert_eq!(c.dir, PathBuf::from("/sys/fs/cgroup"));
    }

    #[test]
    fn v2_bind_mounted_group_strips_the_mount_root() {
        // Docker without a cgroup namespace bind-mounts the container's group: the mount
        // root is the group's path.
        let mountinfo = "\
30 25 0:26 /system.slice/docker-abc.scope /sys/fs/cgroup ro,nosuid - cgroup2 cgroup rw
";
        let read = files(&[
            ("/sys/fs/cgroup/memory.max", "536870912"),
            ("/sys/fs/cgroup/memory.current", "1"),
        ]);
        let c = cgroup_memory("0::/system.slice/docker-abc.scope\n", mountinfo, read).unwrap();
        assert_eq!(c.dir, PathBuf::from("/sys/fs/cgroup"));
        assert_eq!(c.limit, Some(512 << 20));
    }

    #[test]
    fn v2_without_the_memory_controller_is_no_cgroup() {
        let read = files(&[("/sys/fs/cgroup/x/cgroup.procs", "1")]);
        assert_eq!(cgroup_memory("0::/x\n", V2_MOUNTINFO, read), None);
    }

    const V1_MOUNTINFO: &str = "\
24 18 0:20 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:5 - tmpfs tmpfs ro,mode=755
31 24 0:27 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:13 - cgroup cgroup rw,memory
32 24 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:14 - cgroup cgroup rw,cpu,cpuacct
";

    const V1_CGROUP: &str = "\
12:cpu,cpuacct:/kubepods/pod1/ctr
11:memory:/kubepods/pod1/ctr
0::/
";

    #[test]
    fn v1_limit_usage_and_total_inactive_file() {
        let read = files(&[
            (
                "/sys/fs/cgroup/memory/kubepods/pod1/ctr/memory.limit_in_bytes",
                "9223372036854771712\n",
            ),
            (
                "/sys/fs/cgroup/memory/kubepods/pod1/memory.limit_in_bytes",
                "1073741824\n",
            ),
            (
                "/sys/fs/cgroup/memory/kubepods/memory.limit_in_bytes",
                "9223372036854771712\n",
            ),
            (
                "/sys/fs/cgroup/memory/kubepods/pod1/ctr/memory.usage_in_bytes",
                "300\n",
            ),
            (
                "/sys/fs/cgroup/memory/kubepods/pod1/ctr/memory.stat",
                "cache 200\ninactive_file 50\ntotal_inactive_file 100\n",
            ),
        ]);
        let c = cgroup_memory(V1_CGROUP, V1_MOUNTINFO, read).unwrap();
        assert_eq!(c.version, CgroupVersion::V1);
        assert_eq!(
            c.dir,
            PathBuf::from("/sys/fs/cgroup/memory/kubepods/pod1/ctr")
        );
        assert_eq!(c.limit, Some(1 << 30));
        assert_eq!(c.usage, Some(300));
        assert_eq!(c.reclaimable, 100);
        assert_eq!(c.available(), Some((1 << 30) - 200));
    }

    #[test]
    fn v1_unlimited_value_is_no_limit() {
        let read = files(&[
            (
                "/sys/fs/cgroup/memory/kubepods/pod1/ctr/memory.limit_in_bytes",
                "9223372036854771712\n",
            ),
            (
                "/sys/fs/cgroup/memory/kubepods/pod1/ctr/memory.usage_in_bytes",
                "5\n",
            ),
        ]);
        let c = cgroup_memory(V1_CGROUP, V1_MOUNTINFO, read).unwrap();
        assert_eq!(c.limit, None);
    }

    #[test]
    fn no_memory_hierarchy_or_garbage_is_no_cgroup() {
        let read = files(&[]);
        assert_eq!(cgroup_memory("", "", &read), None);
        assert_eq!(cgroup_memory("garbage\n:::\n", "nonsense\n", &read), None);
        // A v1 memory group whose hierarchy is not mounted.
        assert_eq!(cgroup_memory("3:memory:/a\n", V2_MOUNTINFO, &read), None);
    }

    #[test]
    fn mountinfo_octal_escapes_are_decoded() {
        let mounts = parse_mountinfo("40 1 0:30 / /mnt/with\\040space rw - cgroup2 none rw\n");
        assert_eq!(mounts[0].point, PathBuf::from("/mnt/with space"));
        assert_eq!(unescape("a\\134b"), "a\\b");
        assert_eq!(unescape("trailing\\04"), "trailing\\04");
    }

    #[test]
    fn this_machine_reports_some_memory() {
        if cfg!(target_os = "linux") {
            let facts = memory_facts().unwrap();
            assert!(facts.limit() > 0 && facts.limit() <= facts.physical_total);
            assert!(facts.available() <= facts.physical_available);
            assert!(available_memory().is_some_and(|m| m > 0));
        }
    }
}
