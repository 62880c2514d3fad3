//! The settings registry for C: what the PMPI library's C code calls at
//! `MPI_Init` to read its own `OUTBOARD_MPI*` variables with the same
//! parsers (and the same messages) as the rest of Outboard, instead of
//! `atoll` and `strcmp`.

use std::ffi::{c_char, c_int, CStr};

use outboard_settings::ProcessEnv;

use crate::error::{guard, Error};

/// Writes the canonical value of the setting `name` (an `OUTBOARD_*`
/// environment variable) into `value`, NUL-terminated, in at most `cap`
/// bytes: the environment's value if set (and valid), else its default,
/// with a default that follows another variable resolved (e.g.
/// `OUTBOARD_MPI_BCAST_MAX_BYTES` unset: `OUTBOARD_MPI_MAX_BYTES`'s
/// value). Canonical forms: sizes as decimal bytes (`1M` gives
/// `1048576`), booleans `1` or `0`, names as the listed name (`host-based`
/// gives `host`), durations in nanoseconds, other values as given. A
/// setting that is unset and has no fixed default (something decides at
/// run time, e.g. `OUTBOARD_PROGRESS`) gives the empty string.
///
/// Returns `OUTBOARD_OK`, or `OUTBOARD_ERR_ARG` with
/// `outboard_last_error()` set to a sentence: the value is bad
/// (naming the variable, the value and what is accepted), `name` is not a
/// setting (with the closest known name), `name` or `value` is null, or
/// the value with its NUL does not fit in `cap` bytes (then `value` holds
/// the empty string if `cap` > 0). Reads the process environment each
/// call; never panics.
#[no_mangle]
pub unsafe extern "C" fn outboard_setting(name: *const c_char, value: *mut c_char, cap: usize) -> c_int {
    guard(|| {
        if name.is_null() {
            return Err(Error::arg("name is null"));
        }
        if value.is_null() {
            return Err(Error::arg("value is null"));
        }
        if cap > 0 {
            // SAFETY: non-null, and the caller promises `cap` writable bytes.
            unsafe { *value = 0 };
        }
        // SAFETY: non-null, and the caller promises a NUL-terminated string.
        let name = unsafe { CStr::from_ptr(name) }.to_str().map_err(|_| Error::arg("name is not UTF-8 text"))?;
        let resolved = outboard_settings::resolve(name, &ProcessEnv).map_err(|e| Error::arg(e.to_string()))?;
        let text = resolved.value.unwrap_or_default();
        if text.len() >= cap {
            return Err(Error::arg(format!("{name}'s value needs {} bytes with its terminating NUL; cap is {cap}", text.len() + 1)));
        }
        // SAFETY: `text.len() + 1 <= cap` bytes, which the caller promises
        // are writable at `value`; the source is a distinct Rust string.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), value.cast::<u8>(), text.len());
            *value.add(text.len()) = 0;
        }
        Ok(())
    })
}

/// Checks every `OUTBOARD_*` variable in the environment: each setting
/// that is set must hold a valid value, and each `OUTBOARD_*` variable
/// that is set (non-empty) must be a setting Outboard knows. Returns
/// `OUTBOARD_OK`, or `OUTBOARD_ERR_ARG` for the first problem with
/// `outboard_last_error()` set to its sentence, e.g.
/// `OUTBOARD_MPI_MAX_BYTES="1Q" is not a size: use a number of bytes with
/// an optional K, M or G suffix (e.g. 65536, 64K, 1M)`, or
/// `OUTBOARD_PEER_TIMEOUT is not a setting Outboard knows (did you mean
/// OUTBOARD_PEER_TIMEOUT_MS?): ...`. `outboard_init` and
/// `outboard_init_exchange` run the same check first and fail with
/// `OUTBOARD_ERR_INIT` and the same sentence.
#[no_mangle]
pub extern "C" fn outboard_settings_check() -> c_int {
    guard(|| outboard_settings::check(&ProcessEnv).map_err(|e| Error::arg(e.to_string())))
}
