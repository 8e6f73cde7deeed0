//! The device kernels (CUDA C compiled at run time by NVRTC, once per stage).

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaModule};
use cudarc::nvrtc::{CompileError, CompileOptions, compile_ptx_with_opts};

use crate::error::driver;
use crate::library::nvrtc_available;
use crate::{Device, Error, Result};

/// CUDA C source of the fused layout + normalize + flip kernel.
///
/// One thread per output pixel `(b, y, x)` in a grid-stride loop: it reads the `channels`
/// bytes of input pixel `(b, y, flip ? width-1-x : x)` (neighbouring threads read neighbouring
/// pixels) and writes one element per channel plane (neighbouring threads write neighbouring
/// elements of each plane). Each value is looked up in the 256 × channels table built on the
/// host, so there is no device arithmetic to differ from the CPU reference. The source
/// includes no header, so it builds wherever NVRTC runs.
pub const KERNEL_SOURCE: &str = r#"
template <typename T>
__device__ __forceinline__ void hwc_to_chw_lookup(
    const unsigned char* __restrict__ src, const T* __restrict__ table,
    const unsigned char* __restrict__ flips, T* __restrict__ dst,
    unsigned long long batch, unsigned long long height, unsigned long long width,
    unsigned long long channels)
{
    const unsigned long long plane = height * width;
    const unsigned long long total = batch * plane;
    const unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long p = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         p < total; p += step) {
        const unsigned long long b = p / plane;
        const unsigned long long rem = p - b * plane;
        const unsigned long long y = rem / width;
        const unsigned long long x = rem - y * width;
        const unsigned long long sx = (flips != 0 && flips[b] != 0) ? width - 1 - x : x;
        const unsigned char* px = src + ((b * height + y) * width + sx) * channels;
        T* out = dst + b * channels * plane + rem;
        for (unsigned long long c = 0; c < channels; ++c) {
            out[c * plane] = table[(unsigned long long)px[c] * channels + c];
        }
    }
}

extern "C" __global__ void ffcv_hwc_to_chw_lookup64(
    const unsigned char* src, const unsigned long long* table, const unsigned char* flips,
    unsigned long long* dst, unsigned long long batch, unsigned long long height,
    unsigned long long width, unsigned long long channels)
{
    hwc_to_chw_lookup<unsigned long long>(src, table, flips, dst, batch, height, width, channels);
}

extern "C" __global__ void ffcv_hwc_to_chw_lookup32(
    const unsigned char* src, const unsigned int* table, const unsigned char* flips,
    unsigned int* dst, unsigned long long batch, unsigned long long height,
    unsigned long long width, unsigned long long channels)
{
    hwc_to_chw_lookup<unsigned int>(src, table, flips, dst, batch, height, width, channels);
}

extern "C" __global__ void ffcv_hwc_to_chw_lookup16(
    const unsigned char* src, const unsigned short* table, const unsigned char* flips,
    unsigned short* dst, unsigned long long batch, unsigned long long height,
    unsigned long long width, unsigned long long channels)
{
    hwc_to_chw_lookup<unsigned short>(src, table, flips, dst, batch, height, width, channels);
}
"#;

/// Threads per block of the normalize kernel.
pub(crate) const BLOCK_THREADS: u32 = 256;

/// Compiled kernels, loaded into one device context.
#[derive(Debug)]
pub(crate) struct Kernels {
    _module: Arc<CudaModule>,
    /// For 8-byte outputs (f64).
    pub(crate) lookup64: CudaFunction,
    /// For 4-byte outputs (f32).
    pub(crate) lookup32: CudaFunction,
    /// For 2-byte outputs (f16, bf16).
    pub(crate) lookup16: CudaFunction,
    /// Most blocks worth launching (the grid-stride loop covers the rest).
    pub(crate) max_blocks: u32,
}

impl Kernels {
    /// Compiles the kernels for `device`'s architecture and loads them.
    pub(crate) fn compile(device: &Device) -> Result<Self> {
        if !nvrtc_available() {
            return Err(Error::NoNvrtc);
        }
        let (major, minor) = device.compute_capability()?;
        let options = CompileOptions {
            options: vec![format!("--gpu-architecture=compute_{major}{minor}")],
            name: Some("ffcv_gpu_stage.cu".to_owned()),
            ..Default::default()
        };
        let started = std::time::Instant::now();
        let ptx = match compile_ptx_with_opts(KERNEL_SOURCE, options.clone()) {
            Ok(ptx) => ptx,
            Err(first) => {
                // An NVRTC older than the GPU does not know its architecture: its default
                // target is older, and the driver compiles that PTX for the GPU at load time.
                tracing::debug!(error = %compile_log(&first), "retrying NVRTC without --gpu-architecture");
                let fallback = CompileOptions {
                    name: options.name.clone(),
                    ..Default::default()
                };
                compile_ptx_with_opts(KERNEL_SOURCE, fallback).map_err(|e| Error::Compile {
                    options: options.options.clone(),
                    log: format!(
                        "{} (and without the option: {})",
                        compile_log(&first),
                        compile_log(&e)
                    ),
                })?
            }
        };
        let module = device
            .context()
            .load_module(ptx)
            .map_err(driver("loading the compiled kernels"))?;
        let load = |name: &str| {
            module
                .load_function(name)
                .map_err(driver(format!("finding kernel {name}")))
        };
        let lookup64 = load("ffcv_hwc_to_chw_lookup64")?;
        let lookup32 = load("ffcv_hwc_to_chw_lookup32")?;
        let lookup16 = load("ffcv_hwc_to_chw_lookup16")?;
        let sms = device
            .context()
            .attribute(
                cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )
            .map_err(driver("reading the multiprocessor count"))?;
        tracing::debug!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            arch = %format!("compute_{major}{minor}"),
            "compiled gpu-stage kernels with NVRTC"
        );
        Ok(Kernels {
            _module: module,
            lookup64,
            lookup32,
            lookup16,
            // Enough resident blocks to fill every SM several times over.
            max_blocks: (sms.max(1) as u32).saturating_mul(32),
        })
    }
}

fn compile_log(e: &CompileError) -> String {
    match e {
        CompileError::CompileError { nvrtc, log, .. } => {
            format!("{nvrtc:?}: {}", log.to_string_lossy().trim())
        }
        other => format!("{other:?}"),
    }
}
