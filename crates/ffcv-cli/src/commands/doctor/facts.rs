//! The facts `ffcv doctor` records before recommending anything: memory, storage, CPUs and
//! GPUs of this machine, read from `/proc` and `/sys` without running any loader.
//!
//! Every probe is split in two: a pure parser over the text of one kernel file (unit-tested
//! on recorded contents) and a thin reader that fetches that text. A probe that cannot see
//! its answer (a container hiding `/sys`, a filesystem without a block device) reports
//! "unknown" with the reason, never a guess.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// The memory this process may use, in bytes: the machine's (`/proc/meminfo`) capped by
/// its cgroup's limit (`page_cache::memory_facts`, which reads v1 and v2 hierarchies).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    /// The smaller of `MemTotal` and the cgroup limit: what binds.
    pub total: u64,
    /// What can still be taken: `MemAvailable`, capped by the cgroup's limit minus its
    /// usage (its inactive page cache counted as free).
    pub available: u64,
    /// `MemTotal`, the machine's memory.
    pub physical_total: u64,
    /// The cgroup's limit, when one is set.
    pub cgroup_limit: Option<u64>,
}

impl Memory {
    /// The doctor's view of the page cache's memory facts.
    pub fn from_facts(facts: &ffcv::page_cache::MemoryFacts) -> Memory {
        Memory {
            total: facts.limit(),
            available: facts.available().min(facts.limit()),
            physical_total: facts.physical_total,
            cgroup_limit: facts.cgroup.as_ref().and_then(|c| c.limit),
        }
    }

    /// Memory with no cgroup limit (the machine's figures bind), for tests of the rules.
    #[cfg(test)]
    pub fn physical(total: u64, available: u64) -> Memory {
        Memory {
            total,
            available: available.min(total),
            physical_total: total,
            cgroup_limit: None,
        }
    }

    /// Whether the cgroup limit, not the machine's memory, binds.
    pub fn cgroup_binds(&self) -> bool {
        self.cgroup_limit.is_some_and(|l| l <= self.physical_total)
    }
}

/// What kind of storage holds the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StorageKind {
    /// A block device whose queue says `rotational = 1` (a spinning disk).
    Rotational,
    /// A block device whose queue says `rotational = 0` (SSD, NVMe, most virtual disks).
    SolidState,
    /// A memory filesystem (tmpfs, ramfs): reading is a copy from RAM.
    Memory,
    /// A network filesystem (NFS, CIFS, FUSE-mounted object stores).
    Network,
    /// Not visible from here; the text says why.
    Unknown(String),
}

impl StorageKind {
    /// A short stable name for the JSON report.
    pub fn name(&self) -> &'static str {
        match self {
            StorageKind::Rotational => "rotational",
            StorageKind::SolidState => "solid-state",
            StorageKind::Memory => "memory",
            StorageKind::Network => "network",
            StorageKind::Unknown(_) => "unknown",
        }
    }
}

/// The storage holding the file: the filesystem type and, where visible, the device kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Storage {
    /// `major:minor` of the device holding the file.
    pub device: String,
    /// The filesystem type from `/proc/self/mountinfo` (`ext4`, `overlay`, ...), if found.
    pub filesystem: Option<String>,
    /// The block device name (`nvme0n1`, `sda`), if the device has one in `/sys`.
    pub block_device: Option<String>,
    /// What kind of storage that is.
    pub kind: StorageKind,
}

/// Everything about the machine that the decision rules read.
#[derive(Debug, Clone, PartialEq)]
pub struct MachineFacts {
    /// Memory, when `/proc/meminfo` is readable.
    pub memory: Option<Memory>,
    /// The file's storage.
    pub storage: Storage,
    /// CPUs in this process's affinity mask (what `num_workers = -1` means).
    pub affinity_cpus: usize,
    /// Physical cores among those CPUs (hyper-threads counted once), when the topology is visible.
    pub physical_cores: Option<usize>,
    /// NVIDIA GPUs visible to the driver (no CUDA call is made).
    pub gpus: usize,
}

impl MachineFacts {
    /// Probes the current machine for a file at `path`.
    pub fn probe(path: &Path) -> MachineFacts {
        let memory = ffcv::page_cache::memory_facts().map(|f| Memory::from_facts(&f));
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let affinity = parse_cpus_allowed(&status);
        let affinity_cpus = match &affinity {
            Some(cpus) if !cpus.is_empty() => cpus.len(),
            _ => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let physical_cores = count_physical_cores(&cpuinfo, affinity.as_ref());
        MachineFacts {
            memory,
            storage: probe_storage(path),
            affinity_cpus,
            physical_cores,
            gpus: probe_gpus(),
        }
    }

    /// The machine facts as JSON (stable keys).
    pub fn to_json(&self) -> Value {
        let reason = match &self.storage.kind {
            StorageKind::Unknown(reason) => Some(reason.clone()),
            _ => None,
        };
        json!({
            "memory_total_bytes": self.memory.map(|m| m.total),
            "memory_available_bytes": self.memory.map(|m| m.available),
            "memory_physical_total_bytes": self.memory.map(|m| m.physical_total),
            "memory_cgroup_limit_bytes": self.memory.and_then(|m| m.cgroup_limit),
            "memory_bound": self.memory.map(|m| if m.cgroup_binds() { "cgroup" } else { "physical" }),
            "storage": {
                "device": self.storage.device,
                "filesystem": self.storage.filesystem,
                "block_device": self.storage.block_device,
                "kind": self.storage.kind.name(),
                "unknown_reason": reason,
            },
            "affinity_cpus": self.affinity_cpus,
            "physical_cores": self.physical_cores,
            "gpus": self.gpus,
        })
    }
}

/// The CPU ids of `Cpus_allowed_list:` in `/proc/self/status` (`0-3,8,10-11`): the affinity
/// mask `sched_getaffinity` returns, without a system call.
pub fn parse_cpus_allowed(status: &str) -> Option<BTreeSet<usize>> {
    let line = status
        .lines()
        .find(|line| line.starts_with("Cpus_allowed_list:"))?;
    parse_cpu_list(line.split_once(':')?.1)
}

/// Parses a kernel CPU list (`0-3,8`). `None` if any part is malformed.
pub fn parse_cpu_list(text: &str) -> Option<BTreeSet<usize>> {
    let mut cpus = BTreeSet::new();
    for part in text.trim().split(',').filter(|part| !part.is_empty()) {
        match part.split_once('-') {
            Some((first, last)) => {
                let (first, last): (usize, usize) =
                    (first.trim().parse().ok()?, last.trim().parse().ok()?);
                // A hostile or corrupt range must not make us build a huge set.
                if last < first || last - first > 1 << 16 {
                    return None;
                }
                cpus.extend(first..=last);
            }
            None => {
                cpus.insert(part.trim().parse().ok()?);
            }
        }
    }
    Some(cpus)
}

/// Counts distinct `(physical id, core id)` pairs among the processors of `/proc/cpuinfo`
/// that are in the affinity mask. `None` when the file does not name cores (some VMs, ARM).
pub fn count_physical_cores(cpuinfo: &str, affinity: Option<&BTreeSet<usize>>) -> Option<usize> {
    let mut cores = BTreeSet::new();
    for block in cpuinfo.split("\n\n") {
        let mut processor = None;
        let mut package = None;
        let mut core = None;
        for line in block.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            match key.trim() {
                "processor" => processor = value.parse::<usize>().ok(),
                "physical id" => package = Some(value.to_owned()),
                "core id" => core = Some(value.to_owned()),
                _ => {}
            }
        }
        let Some(processor) = processor else {
            continue;
        };
        if affinity.is_some_and(|cpus| !cpus.contains(&processor)) {
            continue;
        }
        cores.insert((package?, core?));
    }
    (!cores.is_empty()).then_some(cores.len())
}

/// Splits a Linux `dev_t` into `(major, minor)` (glibc's `gnu_dev_major`/`gnu_dev_minor`).
pub fn split_dev(dev: u64) -> (u64, u64) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & 0xffff_f000);
    let minor = (dev & 0xff) | ((dev >> 12) & 0xffff_ff00);
    (major, minor)
}

/// The filesystem type of the mount whose device is `major:minor`, from
/// `/proc/self/mountinfo` (field 3 is the device, the type follows the ` - ` separator).
pub fn filesystem_of(mountinfo: &str, device: &str) -> Option<String> {
    mountinfo.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        if before.split_whitespace().nth(2)? != device {
            return None;
        }
        after.split_whitespace().next().map(str::to_owned)
    })
}

/// The storage kind a filesystem type implies on its own, before looking at any device.
pub fn kind_of_filesystem(filesystem: &str) -> Option<StorageKind> {
    match filesystem {
        "tmpfs" | "ramfs" | "devtmpfs" => Some(StorageKind::Memory),
        "nfs" | "nfs4" | "cifs" | "smb3" | "9p" | "ceph" | "glusterfs" | "lustre" => {
            Some(StorageKind::Network)
        }
        fs if fs.starts_with("fuse") => Some(StorageKind::Network),
        _ => None,
    }
}

/// Reads `queue/rotational` of a block device directory in `/sys`, or of its parent when the
/// directory is a partition (`.../block/sda/sda1`).
fn rotational_of(sys_dir: &Path) -> Option<(String, StorageKind)> {
    for dir in [Some(sys_dir), sys_dir.parent()].into_iter().flatten() {
        if let Ok(text) = std::fs::read_to_string(dir.join("queue/rotational")) {
            let name = dir.file_name()?.to_string_lossy().into_owned();
            let kind = match text.trim() {
                "1" => StorageKind::Rotational,
                "0" => StorageKind::SolidState,
                other => StorageKind::Unknown(format!("queue/rotational reads `{other}`")),
            };
            return Some((name, kind));
        }
    }
    None
}

/// Finds the storage holding `path`: its device, filesystem and (for block devices) whether
/// the disk rotates.
pub fn probe_storage(path: &Path) -> Storage {
    use std::os::unix::fs::MetadataExt;
    let dev = match std::fs::metadata(path) {
        Ok(metadata) => metadata.dev(),
        Err(err) => {
            return Storage {
                device: "?".to_owned(),
                filesystem: None,
                block_device: None,
                kind: StorageKind::Unknown(format!("cannot stat {}: {err}", path.display())),
            };
        }
    };
    let (major, minor) = split_dev(dev);
    let device = format!("{major}:{minor}");
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let filesystem = filesystem_of(&mountinfo, &device);
    if let Some(kind) = filesystem.as_deref().and_then(kind_of_filesystem) {
        return Storage {
            device,
            filesystem,
            block_device: None,
            kind,
        };
    }
    let sys = PathBuf::from(format!("/sys/dev/block/{device}"));
    match std::fs::canonicalize(&sys)
        .ok()
        .and_then(|dir| rotational_of(&dir))
    {
        Some((name, kind)) => Storage {
            device,
            filesystem,
            block_device: Some(name),
            kind,
        },
        None => {
            let reason = format!(
                "device {device} ({}) has no block device in /sys (overlay, container or virtual filesystem)",
                filesystem
                    .as_deref()
                    .unwrap_or("filesystem not in mountinfo")
            );
            Storage {
                device,
                filesystem,
                block_device: None,
                kind: StorageKind::Unknown(reason),
            }
        }
    }
}

/// Counts NVIDIA GPUs the driver lists in `/proc/driver/nvidia/gpus/`, else `/dev/nvidiaN`
/// device nodes. No CUDA library is loaded.
pub fn probe_gpus() -> usize {
    if let Ok(entries) = std::fs::read_dir("/proc/driver/nvidia/gpus") {
        let count = entries.filter_map(Result::ok).count();
        if count > 0 {
            return count;
        }
    }
    std::fs::read_dir("/dev")
        .map(|entries| {
            let names: Vec<String> = entries
                .filter_map(Result::ok)
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .collect();
            count_nvidia_nodes(names.iter().map(String::as_str))
        })
        .unwrap_or(0)
}

/// Counts `nvidia0`, `nvidia1`, ... among device node names (`nvidiactl`, `nvidia-uvm` are
/// not GPUs).
pub fn count_nvidia_nodes<'a>(names: impl Iterator<Item = &'a str>) -> usize {
    names
        .filter(|name| {
            name.strip_prefix("nvidia")
                .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cgroup_limit_below_ram_binds_total_and_available() {
        use ffcv::page_cache::{CgroupMemory, CgroupVersion, MemoryFacts};
        let facts = |limit: Option<u64>| MemoryFacts {
            physical_total: 8 << 30,
            physical_available: 6 << 30,
            cgroup: Some(CgroupMemory {
                version: CgroupVersion::V2,
                dir: PathBuf::from("/sys/fs/cgroup/job"),
                limit,
                usage: Some(1 << 30),
                reclaimable: 0,
                ancestors_room: None,
            }),
        };
        let limited = Memory::from_facts(&facts(Some(2 << 30)));
        assert_eq!(
            limited,
            Memory {
                total: 2 << 30,
                available: 1 << 30,
                physical_total: 8 << 30,
                cgroup_limit: Some(2 << 30),
            }
        );
        assert!(limited.cgroup_binds());
        let unlimited = Memory::from_facts(&facts(None));
        assert_eq!(unlimited, Memory::physical(8 << 30, 6 << 30));
        assert!(!unlimited.cgroup_binds());
        // A limit above the machine's memory limits nothing.
        let loose = Memory::from_facts(&facts(Some(16 << 30)));
        assert_eq!((loose.total, loose.cgroup_binds()), (8 << 30, false));
    }

    #[test]
    fn cpu_lists_parse_ranges_and_singletons() {
        let status = "Name:\tffcv\nCpus_allowed:\tff\nCpus_allowed_list:\t0-3,8,10-11\n";
        let cpus = parse_cpus_allowed(status).unwrap();
        assert_eq!(
            cpus.into_iter().collect::<Vec<_>>(),
            [0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(parse_cpu_list("0").unwrap().len(), 1);
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("0-x"), None);
        assert_eq!(parse_cpu_list("0-999999999"), None);
        assert_eq!(parse_cpus_allowed("Name: x\n"), None);
    }

    const CPUINFO_TWO_PACKAGES_HT: &str = "\
processor\t: 0\nphysical id\t: 0\ncore id\t\t: 0\n\n\
processor\t: 1\nphysical id\t: 0\ncore id\t\t: 1\n\n\
processor\t: 2\nphysical id\t: 0\ncore id\t\t: 0\n\n\
processor\t: 3\nphysical id\t: 0\ncore id\t\t: 1\n\n\
processor\t: 4\nphysical id\t: 1\ncore id\t\t: 0\n";

    #[test]
    fn hyperthreads_count_once_and_only_allowed_cpus_count() {
        assert_eq!(count_physical_cores(CPUINFO_TWO_PACKAGES_HT, None), Some(3));
        let first_two: BTreeSet<usize> = [0, 2].into();
        assert_eq!(
            count_physical_cores(CPUINFO_TWO_PACKAGES_HT, Some(&first_two)),
            Some(1)
        );
        let arm = "processor\t: 0\nBogoMIPS\t: 50\n\nprocessor\t: 1\nBogoMIPS\t: 50\n";
        assert_eq!(count_physical_cores(arm, None), None);
    }

    #[test]
    fn dev_t_splits_as_glibc_does() {
        // makedev(8, 1) and makedev(259, 65536) in glibc's encoding.
        assert_eq!(split_dev(0x801), (8, 1));
        let makedev = |major: u64, minor: u64| {
            ((major & 0xfff) << 8)
                | ((major & 0xffff_f000) << 32)
                | (minor & 0xff)
                | ((minor & 0xffff_ff00) << 12)
        };
        let dev = makedev(259, 65536);
        assert_eq!(split_dev(makedev(4097, 3)), (4097, 3));
        assert_eq!(split_dev(dev), (259, 65536));
    }

    #[test]
    fn mountinfo_names_the_filesystem_of_a_device() {
        let text = "\
22 1 0:52 / / rw,relatime - overlay overlay rw,lowerdir=/a\n\
30 22 259:2 / /data rw - ext4 /dev/nvme0n1p2 rw\n\
31 22 0:60 / /dev/shm rw - tmpfs shm rw\n";
        assert_eq!(filesystem_of(text, "259:2").as_deref(), Some("ext4"));
        assert_eq!(filesystem_of(text, "0:60").as_deref(), Some("tmpfs"));
        assert_eq!(filesystem_of(text, "9:9"), None);
        assert_eq!(kind_of_filesystem("tmpfs"), Some(StorageKind::Memory));
        assert_eq!(kind_of_filesystem("nfs4"), Some(StorageKind::Network));
        assert_eq!(kind_of_filesystem("fuse.s3fs"), Some(StorageKind::Network));
        assert_eq!(kind_of_filesystem("ext4"), None);
    }

    #[test]
    fn only_numbered_nvidia_nodes_are_gpus() {
        let names = [
            "nvidia0",
            "nvidia1",
            "nvidiactl",
            "nvidia-uvm",
            "nvme0",
            "null",
        ];
        assert_eq!(count_nvidia_nodes(names.into_iter()), 2);
    }

    #[test]
    fn probing_this_machine_gives_consistent_facts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"x").unwrap();
        let facts = MachineFacts::probe(&path);
        assert!(facts.affinity_cpus >= 1);
        if let Some(cores) = facts.physical_cores {
            assert!(cores >= 1 && cores <= facts.affinity_cpus);
        }
        if let Some(memory) = facts.memory {
            assert!(memory.available <= memory.total);
        }
        assert!(facts.storage.device.contains(':'));
        let missing = probe_storage(&dir.path().join("absent"));
        assert!(
            matches!(missing.kind, StorageKind::Unknown(ref why) if why.contains("cannot stat"))
        );
    }
}
