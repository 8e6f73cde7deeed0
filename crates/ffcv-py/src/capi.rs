//! The C functions behind `ffcv_rs.libffcv` (FFCV's `ffcv.libffcv`): `memcpy`, `imdecode`
//! and `resize_crop` over raw pointers, exported from the extension module so that Python
//! reaches them through `ctypes`.
//!
//! Why a C ABI and not PyO3 functions: FFCV's decoders and users' operations call these
//! from code compiled by numba (`njit(nogil=True)`), which can call a `ctypes` function
//! pointer but not a Python builtin. A `ctypes.CDLL` call also releases the GIL, so the
//! native work runs beside other Python threads either way. The argument lists are
//! FFCV's, so code written against `ffcv.libffcv` runs unchanged.
//!
//! Every function returns 0 on success and a negative code otherwise (`-1` bad argument,
//! `-2` undecodable JPEG, `-3` unsupported option); the Python wrappers turn a negative
//! code into an exception. This is the crate's one `unsafe` module beside the DLPack ones:
//! each block turns caller-given pointers and sizes into slices, and states the contract
//! the caller (`ffcv_rs/libffcv.py`, which passes NumPy arrays' `ctypes.data` with their
//! sizes) keeps.

use std::cell::RefCell;

use ffcv::image::{AreaResizer, CropBox, JpegDecoder};

/// A bad argument (null pointer, zero or overflowing size, crop outside the image).
const BAD_ARGUMENT: i32 = -1;
/// The JPEG could not be decoded, or is not the size the caller gave.
const BAD_JPEG: i32 = -2;
/// An option this build does not implement (a DCT scale factor other than 1).
const UNSUPPORTED: i32 = -3;

thread_local! {
    // One decoder, resizer and scratch image per calling thread: numba's parallel loops
    // call from several threads at once, and the buffers only grow to the largest image.
    static DECODER: RefCell<(JpegDecoder, Vec<u8>)> = RefCell::new((JpegDecoder::new(), Vec::new()));
    static RESIZER: RefCell<AreaResizer> = RefCell::new(AreaResizer::new());
}

/// `h * w * 3` as a byte count, or `None` when it overflows or is zero.
fn rgb_bytes(h: u64, w: u64) -> Option<usize> {
    let n = h.checked_mul(w)?.checked_mul(3)?;
    (n > 0).then_some(usize::try_from(n).ok()?)
}

/// Copies `size` bytes from `source` to `dest` (FFCV's `my_memcpy`).
///
/// # Safety
///
/// `source` must be readable and `dest` writable for `size` bytes, and the two ranges
/// must not overlap (NumPy arrays given by `libffcv.memcpy`, sized by the source array).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ffcv_rs_memcpy(source: *const u8, dest: *mut u8, size: u64) -> i32 {
    if size == 0 {
        return 0;
    }
    if source.is_null() || dest.is_null() {
        return BAD_ARGUMENT;
    }
    let Ok(n) = usize::try_from(size) else {
        return BAD_ARGUMENT;
    };
    // SAFETY: the caller guarantees both ranges are valid for `n` bytes and disjoint.
    unsafe { std::ptr::copy_nonoverlapping(source, dest, n) };
    0
}

/// Decodes the JPEG `source[..source_size]` of `source_height x source_width` pixels into
/// `dst` (FFCV's `imdecode`). Without `enable_crop`, `dst` receives the whole image
/// (`source_height * source_width * 3` bytes); with it, the `crop_height x crop_width`
/// region whose top-left pixel is (`offset_y`, `offset_x`). `do_flip` mirrors the output
/// left-right. Scale factors other than 1/1 return [`UNSUPPORTED`].
///
/// # Safety
///
/// `source` must be readable for `source_size` bytes, and `dst` writable for the output's
/// bytes as above (`crop_height * crop_width * 3` with `enable_crop`).
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)] // FFCV's imdecode signature, argument for argument
pub unsafe extern "C" fn ffcv_rs_imdecode(
    source: *const u8,
    source_size: u64,
    source_height: u32,
    source_width: u32,
    dst: *mut u8,
    crop_height: u32,
    crop_width: u32,
    offset_x: u32,
    offset_y: u32,
    scale_factor_num: u32,
    scale_factor_denom: u32,
    enable_crop: bool,
    do_flip: bool,
) -> i32 {
    if scale_factor_num != scale_factor_denom || scale_factor_num == 0 {
        return UNSUPPORTED;
    }
    let (h, w) = (u64::from(source_height), u64::from(source_width));
    let Some(full) = rgb_bytes(h, w) else {
        return BAD_ARGUMENT;
    };
    let (ch, cw, oy, ox) = if enable_crop {
        (crop_height, crop_width, offset_y, offset_x)
    } else {
        (source_height, source_width, 0, 0)
    };
    let fits = u64::from(oy) + u64::from(ch) <= h && u64::from(ox) + u64::from(cw) <= w;
    let Some(out_len) = rgb_bytes(u64::from(ch), u64::from(cw)) else {
        return BAD_ARGUMENT;
    };
    let Ok(src_len) = usize::try_from(source_size) else {
        return BAD_ARGUMENT;
    };
    if !fits || source.is_null() || dst.is_null() || src_len == 0 {
        return BAD_ARGUMENT;
    }
    // SAFETY: the caller guarantees `source` is readable for `source_size` bytes.
    let jpeg = unsafe { std::slice::from_raw_parts(source, src_len) };
    // SAFETY: the caller guarantees `dst` is writable for the output's bytes, `out_len`.
    let out = unsafe { std::slice::from_raw_parts_mut(dst, out_len) };
    DECODER.with(|cell| {
        let (decoder, scratch) = &mut *cell.borrow_mut();
        let direct = !enable_crop && !do_flip;
        let target: &mut [u8] = if direct {
            out
        } else {
            scratch.resize(full, 0);
            scratch
        };
        match decoder.decode_into(jpeg, target) {
            Ok((dh, dw)) if (dh, dw) == (source_height, source_width) => {}
            _ => return BAD_JPEG,
        }
        if !direct {
            copy_region(scratch, source_width, (oy, ox, ch, cw), do_flip, out);
        }
        0
    })
}

/// Copies the `(top, left, height, width)` region of the packed RGB image `image` (rows
/// of `image_width` pixels) into the packed `out`, mirrored left-right when `flip`.
fn copy_region(
    image: &[u8],
    image_width: u32,
    (top, left, height, width): (u32, u32, u32, u32),
    flip: bool,
    out: &mut [u8],
) {
    let stride = image_width as usize * 3;
    let row_len = width as usize * 3;
    for (r, dst_row) in out
        .chunks_exact_mut(row_len)
        .take(height as usize)
        .enumerate()
    {
        let start = (top as usize + r) * stride + left as usize * 3;
        let src_row = &image[start..start + row_len];
        if flip {
            for (d, s) in dst_row
                .chunks_exact_mut(3)
                .zip(src_row.chunks_exact(3).rev())
            {
                d.copy_from_slice(s);
            }
        } else {
            dst_row.copy_from_slice(src_row);
        }
    }
}

/// Resizes rows `start_row..end_row` and columns `start_col..end_col` of the packed RGB
/// `source` (`source_rows x source_cols`) into the packed `dest` (`dest_rows x
/// dest_cols`) with OpenCV's `INTER_AREA`, bit for bit (FFCV's `resize`; FFCV always
/// passes interpolation 0 and so must the caller).
///
/// # Safety
///
/// `source` must be readable for `source_rows * source_cols * 3` bytes and `dest`
/// writable for `dest_rows * dest_cols * 3` bytes.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)] // FFCV's resize signature, argument for argument
pub unsafe extern "C" fn ffcv_rs_resize(
    interpolation: i64,
    source: *const u8,
    source_rows: i64,
    source_cols: i64,
    start_row: i64,
    end_row: i64,
    start_col: i64,
    end_col: i64,
    dest: *mut u8,
    dest_rows: i64,
    dest_cols: i64,
) -> i32 {
    if interpolation != 0 {
        return UNSUPPORTED;
    }
    let as_u32 = |v: i64| u32::try_from(v).ok();
    let (Some(sh), Some(sw), Some(dh), Some(dw)) = (
        as_u32(source_rows),
        as_u32(source_cols),
        as_u32(dest_rows),
        as_u32(dest_cols),
    ) else {
        return BAD_ARGUMENT;
    };
    let (Some(i), Some(j), Some(i_end), Some(j_end)) = (
        as_u32(start_row),
        as_u32(start_col),
        as_u32(end_row),
        as_u32(end_col),
    ) else {
        return BAD_ARGUMENT;
    };
    if i_end <= i || j_end <= j || i_end > sh || j_end > sw || source.is_null() || dest.is_null() {
        return BAD_ARGUMENT;
    }
    let (Some(src_len), Some(dst_len)) = (
        rgb_bytes(u64::from(sh), u64::from(sw)),
        rgb_bytes(u64::from(dh), u64::from(dw)),
    ) else {
        return BAD_ARGUMENT;
    };
    // SAFETY: the caller guarantees `source` is readable for the whole source image.
    let image = unsafe { std::slice::from_raw_parts(source, src_len) };
    // SAFETY: the caller guarantees `dest` is writable for the whole destination image.
    let out = unsafe { std::slice::from_raw_parts_mut(dest, dst_len) };
    let crop = CropBox {
        i,
        j,
        h: i_end - i,
        w: j_end - j,
    };
    RESIZER.with(|cell| {
        match cell
            .borrow_mut()
            .resize_crop_into(image, sh, sw, crop, out, dh, dw)
        {
            Ok(()) => 0,
            Err(_) => BAD_ARGUMENT,
        }
    })
}
