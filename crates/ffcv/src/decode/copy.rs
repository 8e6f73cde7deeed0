//! Copying a sample's stored bytes into its row, as the default decoders of the byte-like
//! field types do (`defaults.rs`, `fixed_bytes.rs`): exactly, or padded with zeros. The
//! errors say which length disagrees.

/// Copies the stored bytes into a row that must be exactly as long (arrays, fixed-size
/// byte vectors): a stored length that disagrees with the declared row is an error.
pub(super) fn copy_exact(data: &[u8], out: &mut [u8]) -> Result<(), String> {
    if data.len() != out.len() {
        return Err(format!(
            "{} stored bytes for a row of {} (the field's declared size)",
            data.len(),
            out.len()
        ));
    }
    out.copy_from_slice(data);
    Ok(())
}

/// Copies the stored bytes into a row and zero-fills the rest (FFCV leaves the rest of a
/// reused row stale; zeros make batches reproducible).
pub(super) fn copy_padded(data: &[u8], out: &mut [u8]) -> Result<(), String> {
    if data.len() > out.len() {
        return Err(format!(
            "{} stored bytes do not fit the {}-byte row",
            data.len(),
            out.len()
        ));
    }
    out[..data.len()].copy_from_slice(data);
    out[data.len()..].fill(0);
    Ok(())
}
