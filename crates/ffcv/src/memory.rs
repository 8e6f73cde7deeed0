//! Batch memory: where a slot's output buffers live, and typed views of them.
//!
//! The loader asks a [`SlotAllocator`] for each output buffer of each slot, once per
//! loader (again only if `recompile` changes a size). The default [`HeapAllocator`] gives
//! 64-byte aligned heap memory; a GPU stage supplies an allocator of pinned host memory.
//! This module holds the crate's unsafe code outside the decoder kernel: the aligned
//! buffer and the cast of bytes to plain numbers.

use beton_io::{ByteOrder, NumpyKind};

/// One output buffer of a slot. Implementations must give at least 16-byte aligned
/// memory (64 recommended) that stays at the same address while the value lives.
pub trait SlotMemory: Send + Sync {
    /// The buffer's bytes.
    fn as_bytes(&self) -> &[u8];
    /// The buffer's bytes, writable.
    fn as_bytes_mut(&mut self) -> &mut [u8];
}

/// Allocates the output buffers of batch slots.
pub trait SlotAllocator: Send + Sync {
    /// A zeroed buffer of `bytes` bytes.
    fn allocate(&self, bytes: usize) -> std::io::Result<Box<dyn SlotMemory>>;
}

/// Ordinary heap memory, 64-byte aligned.
#[derive(Debug, Clone, Copy, Default)]
pub struct HeapAllocator;

impl SlotAllocator for HeapAllocator {
    fn allocate(&self, bytes: usize) -> std::io::Result<Box<dyn SlotMemory>> {
        Ok(Box::new(HeapMemory::zeroed(bytes)?))
    }
}

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// A zeroed, 64-byte aligned heap buffer.
pub struct HeapMemory {
    lines: Vec<Line>,
    len: usize,
}

impl HeapMemory {
    /// `len` zero bytes; fails (instead of aborting) when the memory is not available.
    pub fn zeroed(len: usize) -> std::io::Result<HeapMemory> {
        let n = len.div_ceil(64);
        let mut lines = Vec::new();
        lines
            .try_reserve_exact(n)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::OutOfMemory, e.to_string()))?;
        lines.resize(n, Line([0; 64]));
        Ok(HeapMemory { lines, len })
    }
}

impl SlotMemory for HeapMemory {
    fn as_bytes(&self) -> &[u8] {
        // SAFETY: `Line` is `repr(C)` over 64 plain bytes (no padding), `lines` holds
        // `ceil(len / 64)` initialised lines, so `len` bytes from its start are initialised
        // and owned by `self` for the borrow's lifetime.
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr().cast::<u8>(), self.len) }
    }

    fn as_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_bytes`; the `&mut self` borrow makes the view exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast::<u8>(), self.len) }
    }
}

/// Asks the CPU to start loading the first cache lines of `bytes` (a hint: it never
/// faults and changes no value). The loader resolves a chunk of samples before copying
/// them, so the misses of random reads overlap instead of queueing one after another;
/// the hardware prefetcher follows on from the first lines.
#[inline]
pub(crate) fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for offset in (0..bytes.len().min(256)).step_by(64) {
        // SAFETY: `_mm_prefetch` is a hint that cannot fault whatever the address (here
        // inside `bytes` anyway), and SSE is part of the x86_64 baseline.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                bytes.as_ptr().add(offset).cast::<i8>(),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

mod sealed {
    pub trait Sealed {}
}

/// A plain number type a batch output can be viewed as: every bit pattern is a valid
/// value and there is no padding.
pub trait Element: sealed::Sealed + Copy + Send + Sync + 'static {
    /// numpy's kind of this type.
    const KIND: NumpyKind;
    /// Bytes per element.
    const SIZE: u64;
}

macro_rules! element {
    ($($t:ty => $kind:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const KIND: NumpyKind = NumpyKind::$kind;
            const SIZE: u64 = std::mem::size_of::<$t>() as u64;
        }
    )*};
}
element!(u8 => UInt, i8 => Int, u16 => UInt, i16 => Int, u32 => UInt, i32 => Int,
         u64 => UInt, i64 => Int, f32 => Float, f64 => Float);

/// Whether values of numpy type `dtype` can be read as `T` on this machine.
pub(crate) fn element_matches<T: Element>(dtype: &beton_io::NumpyDtype) -> bool {
    let order_ok = match dtype.byte_order() {
        ByteOrder::NotApplicable => true,
        ByteOrder::Little => cfg!(target_endian = "little"),
        ByteOrder::Big => cfg!(target_endian = "big"),
    };
    order_ok && dtype.kind() == T::KIND && dtype.item_size() == T::SIZE
}

/// `bytes` as a slice of `T`, if aligned and a whole number of elements.
pub(crate) fn cast_slice<T: Element>(bytes: &[u8]) -> Option<&[T]> {
    // SAFETY: `Element` is sealed to primitive numbers, for which every bit pattern is a
    // valid value; `align_to` only puts correctly aligned elements in the middle part.
    let (head, body, tail) = unsafe { bytes.align_to::<T>() };
    (head.is_empty() && tail.is_empty()).then_some(body)
}
