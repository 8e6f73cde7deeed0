//! JPEG decode throughput on one thread over the JPEG images of a `.beton` file (the
//! bench's `photos` set): full-resolution decode in megapixels per second, to set beside
//! libjpeg-turbo's on the same images (`--dump DIR` writes them as `N.jpg` for PIL or
//! OpenCV); or, with `--mode crop`, the decode of only the region a RandomResizedCrop box
//! needs; or, with `--mode rrc`, the whole `RandomResizedCropRGBImageDecoder` kernel
//! (region decode and resize to 224x224) in samples per second. Every mode also counts the
//! heap allocations of its timed rounds (after a warm-up round), which should be zero.
//!
//! Run: `cargo run --release -p rgb-image --example photo_decode_speed FILE.beton
//! [--dump DIR] [--mode full|crop|rrc] [--rounds N]`. The crop boxes come from a fixed
//! seed per image, so every round and every build decodes the same regions.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use beton_io::{FieldMetadata, IMAGE_MODE_JPEG, Reader};
use rand_core::SeedableRng;
use rand_pcg::Pcg64;
use rgb_image::{
    CropBox, ImageOut, JpegDecoder, RandomResizedCrop, RgbDecoderKernel, RgbDecoderKind,
    StoredImage, random_resized_crop_box,
};

/// The system allocator, counting every allocation and reallocation, so the example can
/// show that the decode loop allocates nothing per image.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every method forwards to `System` with the caller's own arguments, so `System`'s
// guarantees carry over; the counter is a relaxed atomic with no effect on the memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc` is `System::alloc`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, i.e. from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc_zeroed` is `System::alloc_zeroed`'s.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `ptr` came from `System` with `layout`; the caller's contract is
        // `System::realloc`'s.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// What one timed pass does per image.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// The whole image at full resolution.
    Full,
    /// Only the pixels of the image's RandomResizedCrop box.
    Crop,
    /// The RandomResizedCrop decoder kernel to 224x224.
    Rrc,
}

/// One stored JPEG and its crop box.
struct Photo<'a> {
    jpeg: &'a [u8],
    height: u16,
    width: u16,
    /// The seed of the generator the crop box was drawn from.
    seed: u64,
    crop: CropBox,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: photo_decode_speed FILE.beton [--dump DIR] [--mode full|crop|rrc] \
                 [--rounds N]";
    let path = args.get(1).ok_or(usage)?;
    let (mut dump, mut mode, mut rounds) = (None, Mode::Full, 3usize);
    let mut rest = args[2..].iter();
    while let Some(flag) = rest.next() {
        let value = rest.next().ok_or(usage)?;
        match flag.as_str() {
            "--dump" => dump = Some(value.clone()),
            "--mode" => {
                mode = match value.as_str() {
                    "full" => Mode::Full,
                    "crop" => Mode::Crop,
                    "rrc" => Mode::Rrc,
                    _ => return Err(usage.into()),
                }
            }
            "--rounds" => rounds = value.parse::<usize>()?.max(1),
            _ => return Err(usage.into()),
        }
    }
    let reader = Reader::open(path)?;
    let field = reader.field_index("image").ok_or("no field named image")?;
    let params = RandomResizedCrop::default();
    let mut photos = Vec::new();
    for sample in 0..reader.num_samples() {
        let FieldMetadata::RgbImage {
            mode: stored,
            width,
            height,
            ..
        } = reader.metadata(sample, field)?
        else {
            return Err("the image field is not an RGB image field".into());
        };
        if stored != IMAGE_MODE_JPEG {
            continue;
        }
        let Some(bytes) = reader.field_data(sample, field)? else {
            continue;
        };
        if let Some(dir) = &dump {
            std::fs::write(format!("{dir}/{sample}.jpg"), bytes)?;
        }
        let mut rng = Pcg64::seed_from_u64(sample);
        let crop = random_resized_crop_box(u32::from(height), u32::from(width), &params, &mut rng);
        photos.push(Photo {
            jpeg: bytes,
            height,
            width,
            seed: sample,
            crop,
        });
    }
    let px = |h: u32, w: u32| f64::from(h) * f64::from(w);
    let pixels: f64 = photos
        .iter()
        .map(|p| match mode {
            Mode::Full => px(p.height.into(), p.width.into()),
            Mode::Crop | Mode::Rrc => px(p.crop.h, p.crop.w),
        })
        .sum();
    let largest = photos
        .iter()
        .map(|p| usize::from(p.height) * usize::from(p.width) * 3)
        .max()
        .unwrap_or(0);
    let mut out = vec![0u8; largest.max(224 * 224 * 3)];
    let mut decoder = JpegDecoder::new();
    let mut kernel = RgbDecoderKernel::new();
    let kind = RgbDecoderKind::RandomResizedCrop(params);
    let mut pass = || -> Result<(), Box<dyn std::error::Error>> {
        for p in &photos {
            let full = usize::from(p.height) * usize::from(p.width) * 3;
            match mode {
                Mode::Full => {
                    decoder.decode_into(p.jpeg, &mut out[..full])?;
                }
                Mode::Crop => {
                    decoder.decode_region_into(p.jpeg, p.crop, &mut out[..full])?;
                }
                Mode::Rrc => {
                    // The generator `p.crop` was drawn from, so the kernel draws it again.
                    let mut rng = Pcg64::seed_from_u64(p.seed);
                    kernel.decode_sample(
                        &kind,
                        StoredImage {
                            mode: IMAGE_MODE_JPEG,
                            width: p.width,
                            height: p.height,
                            data: p.jpeg,
                        },
                        &mut rng,
                        ImageOut {
                            pixels: &mut out[..224 * 224 * 3],
                            height: 224,
                            width: 224,
                        },
                    )?;
                }
            }
        }
        Ok(())
    };
    // Warm-up: the buffers grow to the largest image here, not in the timed rounds.
    pass()?;
    let (mut best, mut best_cpu, mut allocations) = (f64::MAX, f64::MAX, 0);
    for _ in 0..rounds {
        let cpu = thread_cpu_seconds();
        let (t, before) = (Instant::now(), ALLOCATIONS.load(Ordering::Relaxed));
        pass()?;
        allocations += ALLOCATIONS.load(Ordering::Relaxed) - before;
        best = best.min(t.elapsed().as_secs_f64());
        if let (Some(a), Some(b)) = (cpu, thread_cpu_seconds()) {
            best_cpu = best_cpu.min(b - a);
        }
    }
    let what = match mode {
        Mode::Full => "full decode",
        Mode::Crop => "crop-region decode",
        Mode::Rrc => "RandomResizedCrop 224 kernel",
    };
    println!(
        "{what}: {} JPEGs, {:.1} Mpx: best of {rounds} rounds {:.3} s, {:.1} Mpx/s, {:.0} \
         images/s (one thread); {allocations} allocations in the timed rounds",
        photos.len(),
        pixels / 1e6,
        best,
        pixels / 1e6 / best,
        photos.len() as f64 / best
    );
    if best_cpu < f64::MAX {
        // On a shared machine the thread's CPU time is disturbed far less than the wall time.
        println!(
            "  per CPU second (best round's thread CPU time {best_cpu:.3} s): {:.1} Mpx/s, {:.0} \
             images/s",
            pixels / 1e6 / best_cpu,
            photos.len() as f64 / best_cpu
        );
    }
    Ok(())
}

/// This thread's CPU time so far, from Linux's `/proc/thread-self/schedstat` (its first
/// field, in nanoseconds); `None` where that file does not exist.
fn thread_cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 / 1e9)
}
