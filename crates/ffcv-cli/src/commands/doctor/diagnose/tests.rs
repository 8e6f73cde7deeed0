//! Unit tests of `diagnose.rs`.

use super::*;

fn measurement(rate: f64) -> Measurement {
    Measurement {
        samples_per_sec: rate,
        wall_seconds: 1.0,
        workers: 2,
        ..Measurement::default()
    }
}

#[test]
fn page_waits_name_storage() {
    let m = Measurement {
        page_wait_seconds: 0.6,
        stage_seconds: 0.4,
        ..measurement(100.0)
    };
    let d = diagnose(&m, &MemoryContext::default());
    assert_eq!(d.resource, Resource::Storage);
    assert!(d.evidence.iter().any(|e| e.contains("60% of wall time")));
    assert!(d.evidence.iter().any(|e| e == "no GPU stage"));
}

#[test]
fn busy_workers_name_the_cpu() {
    let m = Measurement {
        stage_seconds: 0.95,
        page_wait_seconds: 0.01,
        slot_wait_seconds: 0.02,
        cpu_seconds: Some(1.9),
        ..measurement(100.0)
    };
    let d = diagnose(&m, &MemoryContext::default());
    assert_eq!(d.resource, Resource::Cpu);
    assert!(
        d.evidence
            .iter()
            .any(|e| e == "pipeline stages on 2 workers: 0.950 s (95% of wall time)")
    );
    assert!(d.evidence.iter().any(|e| e.contains("1.90 CPUs")));
}

#[test]
fn slot_waits_name_the_consumer() {
    let m = Measurement {
        slot_wait_seconds: 0.7,
        stage_seconds: 0.5,
        ..measurement(100.0)
    };
    assert_eq!(
        diagnose(&m, &MemoryContext::default()).resource,
        Resource::Consumer
    );
}

#[test]
fn copies_name_the_gpu_link() {
    let m = Measurement {
        h2d_seconds: Some(0.8),
        stage_seconds: 0.4,
        ..measurement(100.0)
    };
    let d = diagnose(&m, &MemoryContext::default());
    assert_eq!(d.resource, Resource::GpuLink);
    assert!(!d.evidence.iter().any(|e| e == "no GPU stage"));
    let unreported = Measurement {
        gpu_stage: true,
        ..measurement(100.0)
    };
    let d = diagnose(&unreported, &MemoryContext::default());
    assert!(
        d.evidence
            .iter()
            .any(|e| e.starts_with("GPU stage present"))
    );
}

#[test]
fn a_consumer_that_holds_the_producer_back_is_named() {
    // The producer made batches faster than they were taken: it waited on the queue,
    // while the consumer hardly ever waited for a batch.
    let m = Measurement {
        slot_wait_seconds: 0.8,
        consumer_wait_seconds: 0.01,
        stage_seconds: 0.15,
        ..measurement(100.0)
    };
    let d = diagnose(&m, &MemoryContext::default());
    assert_eq!(d.resource, Resource::Consumer);
    assert!(
        d.evidence.iter().any(|e| e
            == "producer waited for the consumer (queue full): 0.800 s (80% of wall time); \
                consumer waited for batches: 0.010 s (1% of wall time)"),
        "{:?}",
        d.evidence
    );
    // The other way round, the loader is behind: the consumer waits, the workers are
    // busy, and the CPU is named.
    let behind = Measurement {
        slot_wait_seconds: 0.001,
        consumer_wait_seconds: 0.9,
        stage_seconds: 0.85,
        ..measurement(100.0)
    };
    assert_eq!(
        diagnose(&behind, &MemoryContext::default()).resource,
        Resource::Cpu
    );
}

#[test]
fn copy_time_close_to_the_batch_time_names_the_gpu_link() {
    // 0.85 s of device copy time in a 1 s window: the link is busy 85% of each batch.
    let m = Measurement {
        gpu_stage: true,
        h2d_seconds: Some(0.85),
        h2d_bytes: 8_500_000_000,
        slot_stage_seconds: 0.05,
        stage_seconds: 0.5,
        consumer_wait_seconds: 0.6,
        ..measurement(100.0)
    };
    let d = diagnose(&m, &MemoryContext::default());
    assert_eq!(d.resource, Resource::GpuLink);
    let copies = d
        .evidence
        .iter()
        .find(|e| e.starts_with("host-to-device copies"))
        .unwrap();
    assert!(copies.contains("0.850 s of device time"), "{copies}");
    assert!(copies.contains("10.00 GB/s"), "{copies}");
    assert!(copies.contains("(85% of wall time)"), "{copies}");
    // The copy time is known: no caveat.
    assert!(
        !d.evidence
            .iter()
            .any(|e| e.starts_with("GPU stage present"))
    );

    // Cheap copies with busy workers: the GPU is there but the CPU is the limit.
    let cheap = Measurement {
        h2d_seconds: Some(0.1),
        stage_seconds: 0.9,
        ..m
    };
    assert_eq!(
        diagnose(&cheap, &MemoryContext::default()).resource,
        Resource::Cpu
    );
}

#[test]
fn a_producer_stuck_in_the_gpu_stage_names_the_gpu_link() {
    // No batch of the window was timed, but the producer spent most of it waiting in
    // the GPU stage for the device.
    let m = Measurement {
        gpu_stage: true,
        h2d_seconds: None,
        slot_stage_seconds: 0.7,
        stage_seconds: 0.2,
        ..measurement(100.0)
    };
    let d = diagnose(&m, &MemoryContext::default());
    assert_eq!(d.resource, Resource::GpuLink);
    assert!(
        d.evidence.iter().any(
            |e| e.starts_with("GPU stage present, but no batch of the window")
                && e.contains("0.700 s (70% of wall time)")
        ),
        "{:?}",
        d.evidence
    );
    // A custom slot stage (no GPU) taking the time is not the GPU link.
    let custom = Measurement {
        gpu_stage: false,
        ..m
    };
    let d = diagnose(&custom, &MemoryContext::default());
    assert_eq!(d.resource, Resource::Cpu);
    assert!(d.evidence.iter().any(|e| e == "no GPU stage"));
}

#[test]
fn memory_pressure_wins_over_any_wait() {
    let busy = Measurement {
        page_wait_seconds: 0.9,
        peak_held_bytes: Some(95),
        // Mapped file pages are not pressure.
        peak_rss_bytes: Some(990),
        ..measurement(100.0)
    };
    let near_budget = MemoryContext {
        limit_bytes: Some(100),
        ..MemoryContext::default()
    };
    assert_eq!(diagnose(&busy, &near_budget).resource, Resource::Memory);
    let roomy = MemoryContext {
        limit_bytes: Some(1000),
        ..MemoryContext::default()
    };
    assert_eq!(diagnose(&busy, &roomy).resource, Resource::Storage);
    let guard = Measurement {
        memory_guard_fired: true,
        ..measurement(0.0)
    };
    let d = diagnose(&guard, &MemoryContext::default());
    assert_eq!(d.resource, Resource::Memory);
    assert!(d.evidence.iter().any(|e| e.contains("memory guard")));
    let declared = MemoryContext {
        limit_bytes: Some(1 << 20),
        file_larger_than_limit: true,
        file_bytes: 3 << 20,
    };
    // Measured, a file larger than the memory is evidence (it chose the process
    // cache with QuasiRandom); what limits that run is measured, here the CPU.
    let busy = Measurement {
        stage_seconds: 0.9,
        ..measurement(100.0)
    };
    let d = diagnose(&busy, &declared);
    assert_eq!(d.resource, Resource::Cpu);
    assert!(
        d.evidence
            .iter()
            .any(|e| e.contains("3.0 MiB") && e.contains("1.0 MiB"))
    );
}

/// The case: an OS-cache run of a file larger than the cgroup, whose page
/// faults count as pipeline time (91% "stage" time), 40x read amplification, 0.46 of
/// 2 CPUs busy.
fn faulting_run() -> Measurement {
    Measurement {
        stage_seconds: 0.91,
        page_wait_seconds: 0.0,
        cpu_seconds: Some(0.46),
        cpus: 2,
        read_bytes: Some(40 << 20),
        payload_bytes: 1 << 20,
        major_faults: Some(900),
        ..measurement(313.0)
    }
}

#[test]
fn reads_from_storage_with_idle_cpus_name_storage_whatever_the_stage_timers_say() {
    let m = faulting_run();
    assert!(m.storage_bound());
    let d = diagnose(&m, &MemoryContext::default());
    assert_eq!(d.resource, Resource::Storage);
    assert!(
        d.evidence
            .iter()
            .any(|e| e.contains("read amplification 40.00")),
        "{:?}",
        d.evidence
    );
    assert!(
        d.evidence
            .iter()
            .any(|e| e.starts_with("major page faults: 900"))
    );
    assert!(
        d.evidence
            .iter()
            .any(|e| e.contains("23% of the 2 it may use"))
    );
    assert!(d.evidence.iter().any(|e| e.ends_with("storage-bound")));
}

#[test]
fn major_faults_alone_show_reads_from_storage() {
    // read_bytes unknown (no /proc/self/io): a fault per three samples still shows it.
    let m = Measurement {
        read_bytes: None,
        major_faults: Some(105),
        ..faulting_run()
    };
    assert!(m.storage_bound());
    assert_eq!(
        diagnose(&m, &MemoryContext::default()).resource,
        Resource::Storage
    );
}

#[test]
fn busy_cpus_or_a_warm_cache_are_not_storage_bound() {
    let busy = Measurement {
        cpu_seconds: Some(1.9),
        ..faulting_run()
    };
    assert!(!busy.storage_bound());
    assert_eq!(
        diagnose(&busy, &MemoryContext::default()).resource,
        Resource::Cpu
    );
    let warm = Measurement {
        read_bytes: Some(0),
        major_faults: Some(0),
        ..faulting_run()
    };
    assert!(!warm.storage_bound());
    assert_eq!(warm.read_amplification(), Some(0.0));
    assert_eq!(
        diagnose(&warm, &MemoryContext::default()).resource,
        Resource::Cpu
    );
    // Nothing known about I/O or CPU: the stage timers decide, as before.
    let unknown = Measurement {
        read_bytes: None,
        major_faults: None,
        cpu_seconds: None,
        ..faulting_run()
    };
    assert!(!unknown.storage_bound());
}

#[test]
fn without_a_measurement_only_memory_can_be_named() {
    let fits = MemoryContext {
        limit_bytes: Some(1 << 30),
        file_larger_than_limit: false,
        file_bytes: 1 << 20,
    };
    assert_eq!(diagnose_unmeasured(false, None, &fits), None);
    let d = diagnose_unmeasured(true, None, &fits).unwrap();
    assert_eq!(d.resource, Resource::Memory);
    assert_eq!(d.evidence, ["the memory guard refused a configuration"]);
    let d = diagnose_unmeasured(true, Some(160 << 20), &fits).unwrap();
    assert!(d.evidence[1].starts_with("the smallest page schedule tried needs 160.0 MiB"));
}
