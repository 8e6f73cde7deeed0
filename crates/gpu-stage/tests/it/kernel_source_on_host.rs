//! Runs the CUDA kernel source itself on the CPU: compiled as C++ with the CUDA built-ins
//! (`threadIdx`, `blockIdx`, ...) emulated and a small grid walked serially, its output must
//! equal the CPU reference byte for byte. This checks the kernel's indexing, flips and
//! grid-stride loop on machines without a GPU. Skipped when no C++ compiler is installed.

use std::path::Path;
use std::process::Command;

use gpu_stage::{
    DeviceDtype, ImageShape, KERNEL_SOURCE, Normalize, NormalizeTable, normalize_reference,
};

const PRELUDE: &str = r#"
#include <cstdio>
#include <cstdlib>
#include <vector>
struct Dim3 { unsigned int x, y, z; };
static Dim3 threadIdx, blockIdx, blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
"#;

/// Reads the inputs, walks a `grid × block` launch serially, writes the output.
const DRIVER: &str = r#"
static std::vector<unsigned char> slurp(const char* path) {
    std::vector<unsigned char> data;
    FILE* f = std::fopen(path, "rb");
    if (!f) return data;
    int c;
    while ((c = std::fgetc(f)) != EOF) data.push_back((unsigned char)c);
    std::fclose(f);
    return data;
}

int main(int argc, char** argv) {
    if (argc != 12) return 2;
    int elem = std::atoi(argv[1]);
    unsigned long long b = std::strtoull(argv[2], 0, 10), h = std::strtoull(argv[3], 0, 10),
                       w = std::strtoull(argv[4], 0, 10), c = std::strtoull(argv[5], 0, 10);
    std::vector<unsigned char> src = slurp(argv[6]), table = slurp(argv[7]), flips = slurp(argv[8]);
    unsigned int grid = std::atoi(argv[10]), block = std::atoi(argv[11]);
    std::vector<unsigned char> out(b * c * h * w * elem, 0xAB);
    const unsigned char* fl = flips.empty() ? 0 : flips.data();
    gridDim.x = grid; blockDim.x = block;
    for (blockIdx.x = 0; blockIdx.x < grid; ++blockIdx.x)
        for (threadIdx.x = 0; threadIdx.x < block; ++threadIdx.x) {
            if (elem == 8)
                ffcv_hwc_to_chw_lookup64(src.data(), (const unsigned long long*)table.data(), fl,
                                         (unsigned long long*)out.data(), b, h, w, c);
            else if (elem == 4)
                ffcv_hwc_to_chw_lookup32(src.data(), (const unsigned int*)table.data(), fl,
                                         (unsigned int*)out.data(), b, h, w, c);
            else
                ffcv_hwc_to_chw_lookup16(src.data(), (const unsigned short*)table.data(), fl,
                                         (unsigned short*)out.data(), b, h, w, c);
        }
    FILE* f = std::fopen(argv[9], "wb");
    if (!f) return 3;
    std::fwrite(out.data(), 1, out.size(), f);
    std::fclose(f);
    return 0;
}
"#;

fn compiler() -> Option<&'static str> {
    ["c++", "g++", "clang++"].into_iter().find(|cxx| {
        Command::new(cxx)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

fn build(dir: &Path, cxx: &str) -> std::path::PathBuf {
    let src = dir.join("kernel_host.cpp");
    std::fs::write(&src, format!("{PRELUDE}{KERNEL_SOURCE}{DRIVER}")).unwrap();
    let exe = dir.join("kernel_host");
    let out = Command::new(cxx)
        .args(["-O1", "-std=c++11", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the kernel source does not compile as C++:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9e3779b97f4a7c15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 24) as u8
        })
        .collect()
}

#[test]
fn kernel_source_equals_the_cpu_reference() {
    let Some(cxx) = compiler() else {
        println!("skipped: no C++ compiler to run the kernel source on the host");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), cxx);
    let cases = [
        // (dtype, batch, height, width, channels, flips, grid, block)
        (DeviceDtype::F32, 3, 5, 7, 3, Some(vec![1u8, 0, 2]), 3, 4),
        (DeviceDtype::F16, 2, 4, 3, 3, None, 1, 1),
        (
            DeviceDtype::Bf16,
            4,
            2,
            9,
            1,
            Some(vec![0, 0, 1, 1]),
            64,
            32,
        ),
        (DeviceDtype::F32, 1, 1, 1, 4, Some(vec![1]), 2, 2),
        (DeviceDtype::F64, 2, 3, 4, 3, Some(vec![1, 0]), 5, 3),
    ];
    for (i, (dtype, batch, height, width, channels, flips, grid, block)) in
        cases.into_iter().enumerate()
    {
        let shape = ImageShape {
            batch,
            height,
            width,
            channels,
        };
        let normalize = Normalize {
            mean: (0..channels).map(|c| 100.0 + 10.0 * c as f64).collect(),
            std: (0..channels).map(|c| 50.0 + 7.0 * c as f64).collect(),
            dtype,
        };
        let table = NormalizeTable::new("img", &normalize).unwrap();
        let src = pattern(shape.elements().unwrap(), i as u64);
        let p = |name: &str| dir.path().join(format!("{i}-{name}"));
        std::fs::write(p("src"), &src).unwrap();
        std::fs::write(p("table"), table.to_device_bytes()).unwrap();
        std::fs::write(p("flips"), flips.clone().unwrap_or_default()).unwrap();
        let status = Command::new(&exe)
            .arg(dtype.size().to_string())
            .args([batch, height, width, channels].map(|n| n.to_string()))
            .args([p("src"), p("table"), p("flips"), p("out")])
            .args([grid.to_string(), block.to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "case {i}: host run failed");
        let expected = normalize_reference(&table, shape, &src, flips.as_deref()).unwrap();
        assert_eq!(std::fs::read(p("out")).unwrap(), expected, "case {i}");
    }
}
