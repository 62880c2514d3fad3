//! `outboard_setting` and `outboard_settings_check` on the process
//! environment: canonical values, defaults that follow other variables,
//! and a sentence for every bad value, unknown name or bad argument. One
//! test, since it changes the process environment.

use std::ffi::{c_char, CStr, CString};

use outboard_capi::*;

fn last_error() -> String {
    unsafe { CStr::from_ptr(outboard_last_error()) }.to_string_lossy().into_owned()
}

/// `outboard_setting(name)`: the code and the value or the error's message.
fn setting(name: &str) -> (i32, String) {
    let name = CString::new(name).unwrap();
    let mut buf = [0x7f as c_char; 64];
    let rc = unsafe { outboard_setting(name.as_ptr(), buf.as_mut_ptr(), buf.len()) };
    if rc == OUTBOARD_OK {
        (rc, unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned())
    } else {
        (rc, last_error())
    }
}

fn set(k: &str, v: &str) {
    std::env::set_var(k, v);
}

#[test]
fn settings_for_c() {
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("OUTBOARD_")) {
        std::env::remove_var(k);
    }
    assert_eq!(outboard_settings_check(), OUTBOARD_OK);

    // Defaults, canonical forms, defaults that follow another variable.
    assert_eq!(setting("OUTBOARD_MPI_MAX_BYTES"), (OUTBOARD_OK, "1048576".into()));
    assert_eq!(setting("OUTBOARD_MPI"), (OUTBOARD_OK, "offload".into()));
    assert_eq!(setting("OUTBOARD_MPI_VERBOSE"), (OUTBOARD_OK, "0".into()));
    assert_eq!(setting("OUTBOARD_PEER_TIMEOUT_MS"), (OUTBOARD_OK, "2000000000".into()));
    assert_eq!(setting("OUTBOARD_PROGRESS"), (OUTBOARD_OK, String::new()), "no fixed default: empty");
    set("OUTBOARD_MPI_MAX_BYTES", "64K");
    set("OUTBOARD_MPI", "host-based");
    set("OUTBOARD_MPI_VERBOSE", "yes");
    set("OUTBOARD_UDP_GSO", "0");
    assert_eq!(setting("OUTBOARD_MPI_BCAST_MAX_BYTES"), (OUTBOARD_OK, "65536".into()));
    assert_eq!(setting("OUTBOARD_MPI_ALLREDUCE"), (OUTBOARD_OK, "host".into()));
    assert_eq!(setting("OUTBOARD_MPI_VERBOSE"), (OUTBOARD_OK, "1".into()));
    assert_eq!(setting("OUTBOARD_UDP_GSO"), (OUTBOARD_OK, "0".into()), "0 is off");
    set("OUTBOARD_MPI_BCAST_MAX_BYTES", "1M");
    assert_eq!(setting("OUTBOARD_MPI_BCAST_MAX_BYTES"), (OUTBOARD_OK, "1048576".into()));
    assert_eq!(outboard_settings_check(), OUTBOARD_OK);

    // A bad value: the variable's sentence, from both functions.
    set("OUTBOARD_MPI_MAX_BYTES", "1Q");
    let want = "OUTBOARD_MPI_MAX_BYTES=\"1Q\" is not a size: use a number of bytes with an optional K, M or G suffix (e.g. 65536, 64K, 1M)";
    assert_eq!(setting("OUTBOARD_MPI_MAX_BYTES"), (OUTBOARD_ERR_ARG, want.into()));
    assert_eq!(setting("OUTBOARD_MPI_REDUCE_MAX_BYTES"), (OUTBOARD_ERR_ARG, want.into()), "follows the bad value");
    assert_eq!(setting("OUTBOARD_MPI_BCAST_MAX_BYTES"), (OUTBOARD_OK, "1048576".into()), "set on its own");
    assert_eq!(outboard_settings_check(), OUTBOARD_ERR_ARG);
    assert_eq!(last_error(), want);
    // ... and from outboard_init, before anything starts.
    let mut w: *mut outboard_world = std::ptr::null_mut();
    assert_eq!(unsafe { outboard_init(&mut w) }, OUTBOARD_ERR_INIT);
    assert_eq!(last_error(), want);
    assert!(w.is_null());
    set("OUTBOARD_MPI_MAX_BYTES", "1M");

    // An unknown variable in the environment, and an unknown name asked for.
    set("OUTBOARD_PEER_TIMEOUT", "500");
    assert_eq!(outboard_settings_check(), OUTBOARD_ERR_ARG);
    assert!(last_error().starts_with("OUTBOARD_PEER_TIMEOUT is not a setting Outboard knows (did you mean OUTBOARD_PEER_TIMEOUT_MS?)"), "{}", last_error());
    std::env::remove_var("OUTBOARD_PEER_TIMEOUT");
    assert_eq!(outboard_settings_check(), OUTBOARD_OK);
    let (rc, msg) = setting("OUTBOARD_MPI_MAXBYTES");
    assert_eq!(rc, OUTBOARD_ERR_ARG);
    assert!(msg.contains("(did you mean OUTBOARD_MPI_MAX_BYTES?)"), "{msg}");

    // Bad arguments never crash.
    let name = CString::new("OUTBOARD_MPI_MAX_BYTES").unwrap();
    let mut small = [0x7f as c_char; 4];
    assert_eq!(unsafe { outboard_setting(name.as_ptr(), small.as_mut_ptr(), small.len()) }, OUTBOARD_ERR_ARG);
    assert_eq!(small[0], 0, "the empty string when it does not fit");
    assert!(last_error().contains("needs 8 bytes"), "{}", last_error());
    assert_eq!(unsafe { outboard_setting(name.as_ptr(), small.as_mut_ptr(), 0) }, OUTBOARD_ERR_ARG);
    assert_eq!(unsafe { outboard_setting(std::ptr::null(), small.as_mut_ptr(), 4) }, OUTBOARD_ERR_ARG);
    assert_eq!(unsafe { outboard_setting(name.as_ptr(), std::ptr::null_mut(), 4) }, OUTBOARD_ERR_ARG);
    let not_utf8 = [0xffu8 as c_char, 0];
    assert_eq!(unsafe { outboard_setting(not_utf8.as_ptr(), small.as_mut_ptr(), 4) }, OUTBOARD_ERR_ARG);
    let mut exact = [0x7f as c_char; 8];
    assert_eq!(unsafe { outboard_setting(name.as_ptr(), exact.as_mut_ptr(), exact.len()) }, OUTBOARD_OK, "7 digits and the NUL");
}
