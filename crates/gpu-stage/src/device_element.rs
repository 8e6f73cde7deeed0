//! The Rust element types a staged output can be viewed as ([`DeviceElement`]), each
//! with the device dtypes whose bytes it reads (f16 and bf16 as `u16` bit patterns); the
//! trait is sealed, since `StagedBatch::view` reinterprets device bytes as these types.

use cudarc::driver::DeviceRepr;

use crate::DeviceDtype;

/// Rust element types a device view can be read as.
pub trait DeviceElement: DeviceRepr + sealed::Sealed {
    /// The Rust type's name, for errors.
    const NAME: &'static str;
    /// Whether outputs of `dtype` can be viewed as this type (f16/bf16 as `u16` bits).
    fn accepts(dtype: DeviceDtype) -> bool;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! element {
    ($t:ty, $($d:ident)|+) => {
        impl sealed::Sealed for $t {}
        impl DeviceElement for $t {
            const NAME: &'static str = stringify!($t);
            fn accepts(dtype: DeviceDtype) -> bool {
                matches!(dtype, $(DeviceDtype::$d)|+)
            }
        }
    };
}
element!(u8, U8);
element!(u16, F16 | Bf16);
element!(i32, I32);
element!(i64, I64);
element!(f32, F32);
element!(f64, F64);
