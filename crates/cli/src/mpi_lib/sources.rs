//! The C sources of liboutboard_mpi, embedded in the binary so that
//! `outboard mpi-lib` works without the repository (an installed binary).

use std::path::Path;

/// The library's C files, compiled together into one shared object (the
/// test `mpi_lib::every_c_file_of_the_library_is_built` checks that none
/// in bindings/mpi is left out).
pub const C_FILES: [(&str, &str); 8] = [
    ("outboard_mpi.c", include_str!("../../../../bindings/mpi/outboard_mpi.c")),
    ("types.c", include_str!("../../../../bindings/mpi/types.c")),
    ("comms.c", include_str!("../../../../bindings/mpi/comms.c")),
    ("colls.c", include_str!("../../../../bindings/mpi/colls.c")),
    ("movement.c", include_str!("../../../../bindings/mpi/movement.c")),
    ("requests.c", include_str!("../../../../bindings/mpi/requests.c")),
    ("modules.c", include_str!("../../../../bindings/mpi/modules.c")),
    ("fortran.c", include_str!("../../../../bindings/mpi/fortran.c")),
];

/// The headers the C files include: the library's own, its installed one
/// (what it adds to MPI, [`INSTALLED_HEADER`]) and the C ABI's.
pub const HEADERS: [(&str, &str); 3] = [
    ("internal.h", include_str!("../../../../bindings/mpi/internal.h")),
    ("outboard_mpi.h", include_str!("../../../../bindings/mpi/outboard_mpi.h")),
    ("outboard.h", include_str!("../../../capi/include/outboard.h")),
];

/// The header a program that calls the library's own functions
/// (`MPIX_Outboard_*`) includes: `outboard mpi-lib` puts it beside the
/// libraries, `outboard install` in include/.
pub const INSTALLED_HEADER: &str = "outboard_mpi.h";

/// Writes the sources and the headers into `dir`.
pub fn write_to(dir: &Path) -> std::io::Result<()> {
    for (name, text) in C_FILES.iter().chain(HEADERS.iter()) {
        std::fs::write(dir.join(name), text)?;
    }
    Ok(())
}
