//! The decision rules of `ffcv doctor`: from the facts (file size, memory, budget, cores,
//! distributed or not, what the run needs) to a starting configuration, with the rule that
//! decided each knob.
//!
//! Pure functions over plain values, so every rule is tested without a machine or a loader.
//! The rules follow FFCV's tuning guide, adjusted for what we do better (QuasiRandom works in
//! distributed mode here):
//!
//! | situation | cache | order |
//! |---|---|---|
//! | fits comfortably in memory, or several processes share it | OS cache | Random (or QuasiRandom) |
//! | larger than memory, exact uniform shuffle not needed | process cache | QuasiRandom |
//! | larger than memory, distributed | process cache | QuasiRandom (ours), or Sequential/Random |
//! | larger than memory, exact uniform shuffle needed | process cache | Random (I/O bound) |
//! | the order must repeat run to run | (as above) | Sequential, or Random with a fixed seed |
//!
//! Workers: one per physical core in the affinity mask (hyper-threads add little to decode).

use serde_json::{Value, json};

use super::facts::Memory;
use crate::commands::order::OrderChoice;

/// A file "fits comfortably" when it takes at most this share of the memory it may use: the
/// rest is left for the model, the batches in flight and the other processes.
pub const COMFORT_NUM: u64 = 3;
/// Denominator of the comfort share (3/4).
pub const COMFORT_DEN: u64 = 4;

/// What the user needs from the run, beyond speed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Needs {
    /// The same order every run (evaluation, debugging, exact reproduction).
    pub repeatable: bool,
    /// An exactly uniform permutation each epoch (QuasiRandom only shuffles within a window
    /// of pages).
    pub uniform: bool,
}

/// The facts the rules read.
#[derive(Debug, Clone, PartialEq)]
pub struct Situation {
    /// Size of the .beton file in bytes.
    pub file_bytes: u64,
    /// The machine's memory, when known.
    pub memory: Option<Memory>,
    /// The process-cache memory budget given with `--max-memory`, if any: the file is judged
    /// against it as if it were the machine's memory.
    pub max_memory: Option<u64>,
    /// Processes reading the file (`--world-size`; 1 = not distributed).
    pub world_size: u64,
    /// CPUs in the affinity mask.
    pub affinity_cpus: usize,
    /// Physical cores in the affinity mask, when visible.
    pub physical_cores: Option<usize>,
    /// What the run needs.
    pub needs: Needs,
    /// The order the user asked for (`--order`), if any: it decides between Sequential and
    /// seeded Random when the order must repeat.
    pub requested_order: Option<OrderChoice>,
    /// The seed the user gave, if any.
    pub seed: Option<u64>,
    /// The source's kind (`s3`, `http`) when the file is a remote object; `None` for a
    /// local file.
    pub remote: Option<&'static str>,
}

/// One rule that fired, with its stable id and the sentence that explains it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fired {
    /// Stable identifier (`fits-in-memory`, `larger-than-memory`, ...).
    pub id: &'static str,
    /// Why, with the numbers.
    pub because: String,
}

/// The starting configuration the rules recommend.
#[derive(Debug, Clone, PartialEq)]
pub struct Recommendation {
    /// `true`: OS page cache (mmap); `false`: the process cache.
    pub os_cache: bool,
    /// The traversal order.
    pub order: OrderChoice,
    /// Pipeline threads.
    pub num_workers: usize,
    /// A seed to fix, when the order must repeat.
    pub seed: Option<u64>,
    /// `true` when the file does not fit the memory it may use: memory is the scarce resource
    /// before anything is measured, and the OS cache is ruled out.
    pub larger_than_memory: bool,
    /// `true` when the file is larger only than a `--max-memory` budget and would fit the
    /// memory the machine has: a run's OS page cache then keeps the whole file, so a
    /// measurement cannot show what the budget costs the OS cache, and it is not tried.
    pub budget_only: bool,
    /// `true` when the file is a remote object: the OS cache cannot serve it (it is never
    /// recommended nor tried) and the order stays the rules' choice.
    pub remote: bool,
    /// The rules that decided, in order.
    pub fired: Vec<Fired>,
}

impl Recommendation {
    /// The recommendation as JSON (stable keys).
    pub fn to_json(&self) -> Value {
        json!({
            "os_cache": self.os_cache,
            "order": order_name(self.order),
            "num_workers": self.num_workers,
            "seed": self.seed,
            "larger_than_memory": self.larger_than_memory,
            "remote": self.remote,
            "rules": self.fired.iter().map(|f| json!({"id": f.id, "because": f.because})).collect::<Vec<_>>(),
        })
    }
}

/// The command-line spelling of an order.
pub fn order_name(order: OrderChoice) -> &'static str {
    match order {
        OrderChoice::Sequential => "sequential",
        OrderChoice::Random => "random",
        OrderChoice::QuasiRandom => "quasi-random",
    }
}

/// `1.5 GiB`, `3.0 MiB`: sizes for people.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// The memory the file is judged against: available RAM, capped by the budget; with neither
/// known, `None`.
pub fn memory_limit(situation: &Situation) -> Option<u64> {
    let available = situation.memory.map(|m| m.available);
    match (available, situation.max_memory) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn fits_comfortably(bytes: u64, limit: u64) -> bool {
    // bytes <= limit * 3/4, without overflow for any u64.
    u128::from(bytes) * u128::from(COMFORT_DEN) <= u128::from(limit) * u128::from(COMFORT_NUM)
}

/// Applies the decision rules.
pub fn recommend(situation: &Situation) -> Recommendation {
    let mut fired = Vec::new();
    let file = human_bytes(situation.file_bytes);
    let distributed = situation.world_size > 1;
    let limit = memory_limit(situation);
    let limit_name = match (situation.memory, situation.max_memory) {
        (Some(m), Some(b)) if b <= m.available => "the --max-memory budget",
        (_, Some(_)) if situation.memory.is_none() => "the --max-memory budget",
        _ => "available memory",
    };

    // Several processes on one machine share one copy in the OS page cache; each process
    // cache would hold its own. Judged against total memory (they share it), within the budget.
    let shared_fits = distributed
        && situation
            .memory
            .map(|m| situation.max_memory.map_or(m.total, |b| b.min(m.total)))
            .is_some_and(|total| fits_comfortably(situation.file_bytes, total));

    let (os_cache, order, larger_than_memory) = match limit {
        Some(limit) if fits_comfortably(situation.file_bytes, limit) => {
            fired.push(Fired {
                id: "fits-in-memory",
                because: format!(
                    "the file ({file}) takes at most 3/4 of {limit_name} ({}): the OS page cache keeps it after the first epoch, so any order reads from RAM",
                    human_bytes(limit)
                ),
            });
            (true, OrderChoice::Random, false)
        }
        _ if shared_fits => {
            fired.push(Fired {
                id: "shared-by-processes",
                because: format!(
                    "{} processes read the file ({file}); one copy in the OS page cache serves them all, where each process cache would hold its own",
                    situation.world_size
                ),
            });
            (true, OrderChoice::Random, false)
        }
        None => {
            fired.push(Fired {
                id: "memory-unknown",
                because: format!(
                    "memory is not visible here and no --max-memory was given; assuming the file ({file}) fits"
                ),
            });
            (true, OrderChoice::Random, false)
        }
        Some(limit) => {
            let limit = human_bytes(limit);
            if situation.needs.uniform {
                fired.push(Fired {
                    id: "larger-than-memory-uniform",
                    because: format!(
                        "the file ({file}) does not fit {limit_name} ({limit}) and the shuffle must be exactly uniform: the process cache with Random, which reads pages scattered over the file (expect the storage to be the limit)"
                    ),
                });
                (false, OrderChoice::Random, true)
            } else if distributed {
                fired.push(Fired {
                    id: "larger-than-memory-distributed",
                    because: format!(
                        "the file ({file}) does not fit {limit_name} ({limit}) and {} processes read it: the process cache with QuasiRandom (distributed here, disjoint pages per rank; FFCV refuses this); Sequential or Random also work",
                        situation.world_size
                    ),
                });
                (false, OrderChoice::QuasiRandom, true)
            } else {
                fired.push(Fired {
                    id: "larger-than-memory",
                    because: format!(
                        "the file ({file}) does not fit {limit_name} ({limit}): the process cache with QuasiRandom reads each page once per epoch and keeps few pages in memory"
                    ),
                });
                (false, OrderChoice::QuasiRandom, true)
            }
        }
    };

    // A remote object cannot be memory-mapped: whatever memory says, its pages go through
    // the process cache, and QuasiRandom reads each page with one request per epoch where
    // Random would fetch pages scattered over the object, several times each.
    let (os_cache, mut order) = match situation.remote {
        None => (os_cache, order),
        Some(kind) => {
            let order = if situation.needs.uniform {
                OrderChoice::Random
            } else {
                OrderChoice::QuasiRandom
            };
            fired.push(Fired {
                id: "remote-source",
                because: format!(
                    "the file is a remote object ({kind}), which cannot be memory-mapped: the process cache{}",
                    if situation.needs.uniform {
                        " with Random, as the shuffle must be exactly uniform (each page may be requested several times an epoch)"
                    } else {
                        " with QuasiRandom, which requests each page once per epoch"
                    }
                ),
            });
            (false, order)
        }
    };

    let mut seed = None;
    if situation.needs.repeatable {
        if situation.requested_order == Some(OrderChoice::Sequential) {
            order = OrderChoice::Sequential;
            fired.push(Fired {
                id: "repeatable",
                because: "the order must repeat and Sequential was asked for: the same order every epoch and run".to_owned(),
            });
        } else {
            order = OrderChoice::Random;
            let chosen = situation.seed.unwrap_or(0);
            seed = Some(chosen);
            fired.push(Fired {
                id: "repeatable",
                because: format!(
                    "the order must repeat: Random with the fixed seed {chosen} (epoch e uses seed + e) gives the same orders every run"
                ),
            });
        }
    }

    let cores = situation
        .physical_cores
        .unwrap_or(situation.affinity_cpus)
        .clamp(1, situation.affinity_cpus.max(1));
    fired.push(Fired {
        id: "workers-physical-cores",
        because: match situation.physical_cores {
            Some(physical) => format!(
                "{cores} workers: one per physical core ({physical} physical cores among {} CPUs in the affinity mask)",
                situation.affinity_cpus
            ),
            None => format!(
                "{cores} workers: the CPUs in the affinity mask (physical cores not visible)"
            ),
        },
    });

    let budget_only = larger_than_memory
        && situation.max_memory.is_some()
        && situation
            .memory
            .is_some_and(|m| fits_comfortably(situation.file_bytes, m.available));
    Recommendation {
        os_cache,
        order,
        num_workers: cores,
        seed,
        larger_than_memory,
        budget_only,
        remote: situation.remote.is_some(),
        fired,
    }
}

/// Id of [`remote_prefetch`]'s rule.
pub const REMOTE_PREFETCH: &str = "remote-prefetch";

/// The loader's `prefetch_ahead` (batches) when nothing says otherwise.
pub const DEFAULT_PREFETCH_AHEAD: usize = 3;

/// The most batches [`remote_prefetch`] recommends ahead: beyond it the memory budget, not
/// the link, is what a deeper prefetch would strain.
pub const MAX_PREFETCH_AHEAD: usize = 64;

/// The prefetch depth for a remote source: enough pages in flight to cover the link's
/// bandwidth-delay product, `pages = ceil(latency x bandwidth / page_size)`, turned into
/// batches with the pages a batch spans, `ceil(pages / pages_per_batch)`, and kept within
/// [`DEFAULT_PREFETCH_AHEAD`]..=[`MAX_PREFETCH_AHEAD`]. `None` when a figure is missing or
/// not positive (nothing was measured).
pub fn remote_prefetch(
    latency_seconds: Option<f64>,
    bandwidth_bytes_per_sec: Option<f64>,
    page_size: u64,
    pages_per_batch: f64,
) -> Option<(usize, Fired)> {
    let latency = latency_seconds.filter(|l| l.is_finite() && *l > 0.0)?;
    let bandwidth = bandwidth_bytes_per_sec.filter(|b| b.is_finite() && *b > 0.0)?;
    if page_size == 0 {
        return None;
    }
    let pages_per_batch = if pages_per_batch.is_finite() {
        pages_per_batch.max(1.0)
    } else {
        1.0
    };
    let in_flight = (latency * bandwidth / page_size as f64).ceil().max(1.0);
    let batches = (in_flight / pages_per_batch).ceil();
    // Saturating float-to-int conversion; the clamp bounds it anyway.
    let depth = (batches as usize).clamp(DEFAULT_PREFETCH_AHEAD, MAX_PREFETCH_AHEAD);
    let because = format!(
        "remote source: {:.2} ms per request x {}/s = {} in flight, {in_flight:.0} page(s) of {}; a batch spans {pages_per_batch:.1} page(s), so {batches:.0} batch(es) ahead, kept within {DEFAULT_PREFETCH_AHEAD}..={MAX_PREFETCH_AHEAD}: --prefetch-ahead {depth}",
        latency * 1e3,
        human_bytes(bandwidth as u64),
        human_bytes((latency * bandwidth) as u64),
        human_bytes(page_size),
    );
    Some((
        depth,
        Fired {
            id: REMOTE_PREFETCH,
            because,
        },
    ))
}

/// Id of [`normalize_on_device`]'s rule.
pub const NORMALIZE_ON_DEVICE: &str = "normalize-on-device";

/// The device rule: with a GPU present and the CPU the scarce resource (the measured
/// diagnosis), a `NormalizeImage` run by the CPU workers is moved to the device, behind
/// `ToDevice`, as FFCV's ImageNet configuration does (`ToDevice` before `NormalizeImage`):
/// the workers then only decode, crop and flip, the batch crosses the link as `uint8` (a
/// quarter of float32's bytes), and the GPU normalizes it in a fused kernel.
///
/// `cpu_normalizing` names the fields whose CPU transforms normalize. `None` when the rule
/// does not apply.
pub fn normalize_on_device(
    gpus: usize,
    cpu_scarce: bool,
    cpu_normalizing: &[String],
) -> Option<Fired> {
    if gpus == 0 || !cpu_scarce || cpu_normalizing.is_empty() {
        return None;
    }
    let fields = cpu_normalizing
        .iter()
        .map(|f| format!("`{f}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let gpus = if gpus == 1 {
        "a GPU is present".to_owned()
    } else {
        format!("{gpus} GPUs are present")
    };
    Some(Fired {
        id: NORMALIZE_ON_DEVICE,
        because: format!(
            "the CPU is the scarce resource, {gpus}, and {fields} normalize(s) on the CPU: \
             move normalize to the device (ToDevice before NormalizeImage, as FFCV's ImageNet \
             configuration does; in Rust `ffcv::gpu::ToDevice::normalize`), so the workers \
             stop at uint8 and the copies carry a quarter of float32's bytes"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn situation(file_bytes: u64) -> Situation {
        Situation {
            file_bytes,
            memory: Some(Memory::physical(16 * GIB, 12 * GIB)),
            max_memory: None,
            world_size: 1,
            affinity_cpus: 8,
            physical_cores: Some(4),
            needs: Needs::default(),
            requested_order: None,
            seed: None,
            remote: None,
        }
    }

    fn ids(recommendation: &Recommendation) -> Vec<&'static str> {
        recommendation.fired.iter().map(|f| f.id).collect()
    }

    #[test]
    fn a_file_well_inside_available_memory_gets_the_os_cache_and_random() {
        let r = recommend(&situation(GIB));
        assert!(r.os_cache);
        assert_eq!(r.order, OrderChoice::Random);
        assert!(!r.larger_than_memory);
        assert_eq!(ids(&r), ["fits-in-memory", "workers-physical-cores"]);
    }

    #[test]
    fn larger_only_than_a_budget_the_machine_holds_is_budget_only() {
        // 1 GiB against a 512 MiB budget, 12 GiB available: the machine would keep it.
        let r = recommend(&Situation {
            max_memory: Some(GIB / 2),
            ..situation(GIB)
        });
        assert!(r.larger_than_memory && r.budget_only);
        assert!(!r.os_cache);
        // Larger than the memory the machine has: a run feels it.
        let r = recommend(&Situation {
            max_memory: Some(GIB / 2),
            ..situation(13 * GIB)
        });
        assert!(r.larger_than_memory && !r.budget_only);
        assert!(!recommend(&situation(13 * GIB)).budget_only);
        assert!(!recommend(&situation(GIB)).budget_only);
    }

    #[test]
    fn comfort_means_three_quarters_of_available_memory() {
        // 12 GiB available: 9 GiB fits, one byte more does not.
        assert!(recommend(&situation(9 * GIB)).os_cache);
        let r = recommend(&situation(9 * GIB + 1));
        assert!(!r.os_cache);
        assert!(r.larger_than_memory);
    }

    #[test]
    fn a_file_larger_than_memory_gets_the_process_cache_and_quasi_random() {
        let r = recommend(&situation(40 * GIB));
        assert!(!r.os_cache);
        assert_eq!(r.order, OrderChoice::QuasiRandom);
        assert!(r.larger_than_memory);
        assert_eq!(ids(&r)[0], "larger-than-memory");
        assert!(r.fired[0].because.contains("40.0 GiB"), "{:?}", r.fired[0]);
    }

    #[test]
    fn the_max_memory_budget_stands_in_for_ram() {
        let mut s = situation(100 << 20);
        s.max_memory = Some(64 << 20);
        let r = recommend(&s);
        assert!(!r.os_cache);
        assert_eq!(r.order, OrderChoice::QuasiRandom);
        assert!(r.fired[0].because.contains("--max-memory budget"));
        s.max_memory = Some(200 << 20);
        assert!(recommend(&s).os_cache);
    }

    #[test]
    fn an_exact_uniform_shuffle_larger_than_memory_keeps_random() {
        let mut s = situation(40 * GIB);
        s.needs.uniform = true;
        let r = recommend(&s);
        assert!(!r.os_cache);
        assert_eq!(r.order, OrderChoice::Random);
        assert_eq!(ids(&r)[0], "larger-than-memory-uniform");
    }

    #[test]
    fn distributed_larger_than_memory_uses_our_distributed_quasi_random() {
        let mut s = situation(40 * GIB);
        s.world_size = 8;
        let r = recommend(&s);
        assert!(!r.os_cache);
        assert_eq!(r.order, OrderChoice::QuasiRandom);
        assert_eq!(ids(&r)[0], "larger-than-memory-distributed");
        assert!(r.fired[0].because.contains("Sequential or Random"));
    }

    #[test]
    fn several_processes_share_one_os_cached_copy_when_it_fits_total_memory() {
        // 10 GiB: not comfortable within 12 GiB available, but within 16 GiB total that the
        // ranks share.
        let mut s = situation(10 * GIB);
        s.world_size = 4;
        let r = recommend(&s);
        assert!(r.os_cache);
        assert_eq!(r.order, OrderChoice::Random);
        assert_eq!(ids(&r)[0], "shared-by-processes");
    }

    #[test]
    fn a_repeatable_run_gets_seeded_random_or_the_sequential_it_asked_for() {
        let mut s = situation(GIB);
        s.needs.repeatable = true;
        let r = recommend(&s);
        assert_eq!((r.order, r.seed), (OrderChoice::Random, Some(0)));
        s.seed = Some(42);
        assert_eq!(recommend(&s).seed, Some(42));
        s.requested_order = Some(OrderChoice::Sequential);
        let r = recommend(&s);
        assert_eq!((r.order, r.seed), (OrderChoice::Sequential, None));
        assert!(ids(&r).contains(&"repeatable"));
        // Repeatable overrides QuasiRandom, but not the cache choice.
        let mut big = situation(40 * GIB);
        big.needs.repeatable = true;
        let r = recommend(&big);
        assert!(!r.os_cache);
        assert_eq!(r.order, OrderChoice::Random);
    }

    #[test]
    fn workers_are_the_physical_cores_within_the_affinity_mask() {
        let mut s = situation(GIB);
        assert_eq!(recommend(&s).num_workers, 4);
        s.physical_cores = None;
        assert_eq!(recommend(&s).num_workers, 8);
        s.physical_cores = Some(16);
        s.affinity_cpus = 2;
        assert_eq!(recommend(&s).num_workers, 2);
    }

    #[test]
    fn unknown_memory_without_a_budget_assumes_the_file_fits_and_says_so() {
        let mut s = situation(40 * GIB);
        s.memory = None;
        let r = recommend(&s);
        assert!(r.os_cache);
        assert_eq!(ids(&r)[0], "memory-unknown");
        s.max_memory = Some(GIB);
        let r = recommend(&s);
        assert!(!r.os_cache);
        assert!(r.fired[0].because.contains("--max-memory budget"));
    }

    #[test]
    fn sizes_print_in_binary_units() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(3 << 20), "3.0 MiB");
        assert_eq!(human_bytes(u64::MAX), "16777216.0 TiB");
    }

    #[test]
    fn normalize_moves_to_the_device_only_with_a_gpu_a_scarce_cpu_and_a_cpu_normalize() {
        let image = vec!["image".to_owned()];
        let fired = normalize_on_device(1, true, &image).expect("all three hold");
        assert_eq!(fired.id, NORMALIZE_ON_DEVICE);
        assert!(
            fired.because.contains("ToDevice before NormalizeImage"),
            "{}",
            fired.because
        );
        assert!(fired.because.contains("`image`"), "{}", fired.because);
        assert!(
            fired.because.contains("a GPU is present"),
            "{}",
            fired.because
        );
        assert!(
            normalize_on_device(4, true, &image)
                .unwrap()
                .because
                .contains("4 GPUs are present")
        );
        assert_eq!(normalize_on_device(0, true, &image), None, "no GPU");
        assert_eq!(
            normalize_on_device(1, false, &image),
            None,
            "the CPU is not scarce"
        );
        assert_eq!(
            normalize_on_device(1, true, &[]),
            None,
            "nothing normalizes on the CPU"
        );
    }

    #[test]
    fn a_remote_object_gets_the_process_cache_and_quasi_random_even_when_it_fits() {
        let mut s = situation(GIB);
        s.remote = Some("http");
        let r = recommend(&s);
        assert!(!r.os_cache, "never os_cache=true for a URL");
        assert!(r.remote);
        assert_eq!(r.order, OrderChoice::QuasiRandom);
        assert!(!r.larger_than_memory);
        assert_eq!(
            ids(&r),
            ["fits-in-memory", "remote-source", "workers-physical-cores"]
        );
        assert!(r.fired[1].because.contains("(http)"), "{:?}", r.fired[1]);
        // Shared by ranks, or memory unknown: still the process cache.
        s.world_size = 4;
        assert!(!recommend(&s).os_cache);
        s.memory = None;
        assert!(!recommend(&s).os_cache);
        // A uniform shuffle keeps Random; a repeatable order still overrides the order but
        // not the cache.
        let mut uniform = situation(40 * GIB);
        uniform.remote = Some("s3");
        uniform.needs.uniform = true;
        let r = recommend(&uniform);
        assert_eq!((r.os_cache, r.order), (false, OrderChoice::Random));
        let mut repeat = situation(GIB);
        repeat.remote = Some("s3");
        repeat.needs.repeatable = true;
        let r = recommend(&repeat);
        assert_eq!((r.os_cache, r.order), (false, OrderChoice::Random));
        // A local file is unaffected.
        let local = recommend(&situation(GIB));
        assert!(local.os_cache && !local.remote);
    }

    #[test]
    fn the_remote_prefetch_depth_is_the_bandwidth_delay_product_in_batches() {
        const MIB: u64 = 1 << 20;
        // 20 ms x 1 GiB/s = 20.48 MiB in flight = 21 pages of 1 MiB; 2 pages a batch: 11.
        let (depth, fired) =
            remote_prefetch(Some(0.020), Some(GIB as f64), MIB, 2.0).expect("measured");
        assert_eq!(depth, 11);
        assert_eq!(fired.id, REMOTE_PREFETCH);
        assert!(
            fired.because.contains("--prefetch-ahead 11"),
            "{}",
            fired.because
        );
        assert!(fired.because.contains("21 page(s)"), "{}", fired.because);
        // A batch smaller than a page counts as one page.
        assert_eq!(
            remote_prefetch(Some(0.020), Some(GIB as f64), MIB, 0.25)
                .unwrap()
                .0,
            21
        );
        // A fast link never goes below the default, a huge product never above the cap.
        assert_eq!(
            remote_prefetch(Some(1e-4), Some(1e8), 8 * MIB, 1.0)
                .unwrap()
                .0,
            DEFAULT_PREFETCH_AHEAD
        );
        assert_eq!(
            remote_prefetch(Some(10.0), Some(1e12), MIB, 1.0).unwrap().0,
            MAX_PREFETCH_AHEAD
        );
        // Nothing measured, or nonsense: no advice.
        assert_eq!(remote_prefetch(None, Some(1e9), MIB, 1.0), None);
        assert_eq!(remote_prefetch(Some(0.01), None, MIB, 1.0), None);
        assert_eq!(remote_prefetch(Some(0.0), Some(1e9), MIB, 1.0), None);
        assert_eq!(remote_prefetch(Some(f64::NAN), Some(1e9), MIB, 1.0), None);
        assert_eq!(remote_prefetch(Some(0.01), Some(1e9), 0, 1.0), None);
    }
}
