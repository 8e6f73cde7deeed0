//! Which instruction set the image kernels run with, chosen once per
//! decoder or resizer at run time.
//!
//! Every kernel has a portable version; on x86_64 with AVX2 (and BMI2) the
//! hot ones also run as copies compiled for those instructions, or as
//! explicit AVX2 code, with results identical to the portable code (the
//! tests compare the two on random inputs).

/// The instruction set a kernel runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    /// Portable Rust, whatever the target.
    Scalar,
    /// x86_64 with AVX2 and BMI2, detected at run time.
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl Isa {
    /// The best instruction set this CPU supports.
    pub(crate) fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("bmi2")
            {
                return Isa::Avx2;
            }
        }
        Isa::Scalar
    }
}

impl Default for Isa {
    fn default() -> Self {
        Self::detect()
    }
}
