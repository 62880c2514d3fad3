//! The C sources of liboutboard_mpi, embedded in the binary so that
//! `outboard mpi-lib` works without the repository (an installed binary).

use std::path::Path;

/// The library's C files, compiled together into one shared object.
pub const C_FILES: [(&str, &str); 2] = [
    (
        "outboard_mpi.c",
        include_str!("../../../../bindings/mpi/outboard_mpi.c"),
    ),
    (
        "fortran.c",
        include_str!("../../../../bindings/mpi/fortran.c"),
    ),
];

/// The C ABI's header, which outboard_mpi.c includes.
pub const HEADER: (&str, &str) = (
    "outboard.h",
    include_str!("../../../capi/include/outboard.h"),
);

/// Writes the sources and the header into `dir`.
pub fn write_to(dir: &Path) -> std::io::Result<()> {
    for (name, text) in C_FILES.iter().chain([&HEADER]) {
        std::fs::write(dir.join(name), text)?;
    }
    Ok(())
}
