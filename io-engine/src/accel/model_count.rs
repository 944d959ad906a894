//! [`model_count`]: the value of an offload module's `--*-model N` flag
//! (`--ioat-model`, `--dsa-model`), refused in a build without that
//! module's device model.
//!
//! Thread: the thread that parses the flags (the binaries' main thread).

/// `s` as a count of model devices; anything but 0 is refused with
/// `not_built` (which names the cargo feature) when the model is not
/// `built_in`.
pub fn model_count(s: &str, built_in: bool, not_built: &str) -> Result<usize, String> {
    let n: usize = s.parse().map_err(|e| format!("{e}"))?;
    if n > 0 && !built_in {
        return Err(not_built.into());
    }
    Ok(n)
}
