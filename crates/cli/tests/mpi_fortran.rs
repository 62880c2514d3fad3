//! liboutboard_mpi under Fortran programs: bindings/mpi/tests/fortran.f90
//! (`use mpi`) and fortran_f08.f90 (`use mpi_f08`), built with each MPI's
//! gfortran wrapper and run with the library preloaded under Open MPI and
//! MPICH with 2 and 4 ranks. Every result must be right, and the verbose
//! lines must show that the Fortran calls reached the library's Fortran
//! entry points and were taken over (a Fortran program's calls otherwise
//! go straight to PMPI inside the MPI, and the results would still be right).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use outboard_cli::mpi_lib;

fn source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../bindings/mpi/tests")
        .join(name)
}

/// The collectives' C names, as the C layer's verbose lines give them.
/// Checks `fortran.f90` makes per rank: 27 per communicator, on two.
const FORTRAN_CHECKS: u32 = 54;

/// The data-movement calls and scans `fortran.f90` makes: Fortran entry
/// point, the C function it calls, both taken over on both communicators.
const MOVEMENT: [(&str, &str); 7] = [
    ("MPI_ALLGATHER", "MPI_Allgather"),
    ("MPI_GATHER", "MPI_Gather"),
    ("MPI_SCATTER", "MPI_Scatter"),
    ("MPI_ALLTOALL", "MPI_Alltoall"),
    ("MPI_REDUCE_SCATTER_BLOCK", "MPI_Reduce_scatter_block"),
    ("MPI_SCAN", "MPI_Scan"),
    ("MPI_EXSCAN", "MPI_Exscan"),
];

const COLLECTIVES: [&str; 8] = [
    "MPI_Barrier",
    "MPI_Bcast",
    "MPI_Reduce",
    "MPI_Allreduce",
    "MPI_Ibarrier",
    "MPI_Ibcast",
    "MPI_Ireduce",
    "MPI_Iallreduce",
];

/// One MPI's library and the two Fortran programs built against it, in a
/// directory removed at the end.
struct Fortran {
    mpi: &'static str,
    dir: PathBuf,
    lib: PathBuf,
}

impl Fortran {
    /// Builds everything, or says why this machine cannot (no MPI, no
    /// gfortran); a library or program that does not compile fails.
    fn build(mpi: &'static str) -> Result<Fortran, String> {
        if Command::new("gfortran").arg("--version").output().is_err() {
            return Err("gfortran not found (apt-get install -y gfortran)".into());
        }
        let dir =
            std::env::temp_dir().join(format!("outboard-mpi-fortran-{mpi}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let lib = match mpi_lib::build(
            Path::new(&format!("mpicc.{mpi}")),
            &dir,
            &common::capi_lib_dir(),
        ) {
            Ok(built) => built.path,
            Err(e) if e.mpi_missing() => return Err(e.to_string()),
            Err(e) => panic!("{e}"),
        };
        let f = Fortran { mpi, dir, lib };
        for prog in ["fortran", "fortran_f08"] {
            let fc = format!("mpif90.{mpi}");
            let o = Command::new(&fc)
                .arg("-O1")
                .arg(source(&format!("{prog}.f90")))
                .arg("-o")
                .arg(f.dir.join(prog))
                .current_dir(&f.dir) // the .mod files gfortran writes
                .output()
                .map_err(|e| format!("{fc} not found ({e})"))?;
            assert!(
                o.status.success(),
                "{fc} cannot build {prog}.f90: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        Ok(f)
    }

    /// Runs `prog` on `n` ranks, preloaded unless `preload` is false,
    /// verbose; returns stdout and stderr after checking that every rank
    /// made `checks` checks, all right.
    fn run(&self, prog: &str, n: u32, preload: bool, checks: u32) -> (String, String) {
        let lib = self.lib.display().to_string();
        let env: Vec<(&str, &str)> = if preload {
            vec![("LD_PRELOAD", &lib), ("OUTBOARD_MPI_VERBOSE", "1")]
        } else {
            vec![("OUTBOARD_MPI_VERBOSE", "1")]
        };
        let o = common::mpirun::mpirun(self.mpi, n, &env, &self.dir.join(prog), 120)
            .output()
            .unwrap();
        let (so, se) = (
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        );
        let ctx = format!(
            "{prog} under {} with {n} ranks (preloaded: {preload}):\nstdout:\n{so}\nstderr:\n{se}",
            self.mpi
        );
        assert_ne!(o.status.code(), Some(common::mpirun::HUNG), "hung: {ctx}");
        assert!(o.status.success(), "{ctx}");
        assert!(!so.contains("WRONG"), "{ctx}");
        for r in 0..n {
            let line = format!("rank {r}: {checks} checks, 0 wrong");
            assert!(so.contains(&line), "no \"{line}\": {ctx}");
        }
        (so, se)
    }
}

impl Drop for Fortran {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Asserts that stderr has each of `lines`, with the context for failures.
fn assert_lines(se: &str, lines: impl IntoIterator<Item = String>, ctx: &str) {
    for line in lines {
        assert!(se.contains(&line), "no \"{line}\" in:\n{se}\n({ctx})");
    }
}

/// The `use mpi` program: everything reaches the Fortran entry points and
/// the eight collectives are taken over on both communicators, the
/// reductions on INTEGER and DOUBLE PRECISION included.
fn check_use_mpi(f: &Fortran, n: u32) {
    let (so, se) = f.run("fortran", n, true, FORTRAN_CHECKS);
    let ctx = format!("fortran.f90 under {} with {n} ranks", f.mpi);
    assert_lines(&se, [format!("Outboard up on {n} ranks")], &ctx);
    let entries = [
        ("MPI_INIT", "MPI_Init"),
        ("MPI_BARRIER", "MPI_Barrier"),
        ("MPI_BCAST", "MPI_Bcast"),
        ("MPI_REDUCE", "MPI_Reduce"),
        ("MPI_ALLREDUCE", "MPI_Allreduce"),
        ("MPI_IBARRIER", "MPI_Ibarrier"),
        ("MPI_IBCAST", "MPI_Ibcast"),
        ("MPI_IREDUCE", "MPI_Ireduce"),
        ("MPI_IALLREDUCE", "MPI_Iallreduce"),
        ("MPI_WAIT", "MPI_Wait"),
        ("MPI_WAITALL", "MPI_Waitall"),
        ("MPI_WAITANY", "MPI_Waitany"),
        ("MPI_TEST", "MPI_Test"),
        ("MPI_COMM_SET_INFO", "MPI_Comm_set_info"),
        ("MPI_FINALIZE", "MPI_Finalize"),
    ];
    assert_lines(
        &se,
        entries.iter().chain(&MOVEMENT).map(|(f, c)| format!("rank 0: Fortran {f}: calls {c}")),
        &ctx,
    );
    // The split's MPI_Info key was taken: its broadcasts ran on the tree.
    let ran = se.lines().find(|l| l.starts_with("outboard_mpi: rank 0: fsplit's blocking collectives ran as: ")).unwrap_or_else(|| panic!("no record of fsplit in:\n{se}\n({ctx})"));
    assert!(ran.contains("broadcast offloaded 3-ary tree"), "{ran}\n({ctx})");
    for comm in ["MPI_COMM_WORLD", "fsplit"] {
        assert_lines(
            &se,
            COLLECTIVES.iter().chain(MOVEMENT.iter().map(|(_, c)| c)).map(|c| format!("rank 0: {c} on {comm}: taken over (offloaded)")),
            &ctx,
        );
    }
    for not in ["not offloadable", "passed to the MPI's own Fortran binding"] {
        assert!(!se.contains(not), "\"{not}\" in:\n{se}\n({ctx})");
    }
    // The library's MPI_WAITANY gives MPI_UNDEFINED where MPICH's own
    // binding gives MPI_UNDEFINED + 1.
    assert!(!so.contains("MPI_UNDEFINED + 1"), "{so}\n({ctx})");
}

/// The `use mpi_f08` program. Open MPI's mpi_f08 routines all bypass the C
/// layer, so all come through the Fortran entry points; MPICH's reach its C
/// functions themselves except barrier, ibarrier, init, finalize and the
/// waits and tests, which would go to PMPI (and a wait could not complete
/// an Outboard request).
fn check_f08(f: &Fortran, n: u32) {
    let (_, se) = f.run("fortran_f08", n, true, 16);
    let ctx = format!("fortran_f08.f90 under {} with {n} ranks", f.mpi);
    assert_lines(&se, [format!("Outboard up on {n} ranks")], &ctx);
    let mut entries = vec![
        "MPI_INIT",
        "MPI_BARRIER",
        "MPI_IBARRIER",
        "MPI_WAIT",
        "MPI_WAITALL",
        "MPI_TEST",
        "MPI_FINALIZE",
    ];
    let mut taken = vec!["MPI_Barrier", "MPI_Bcast", "MPI_Ibarrier", "MPI_Ibcast"];
    if f.mpi == "openmpi" {
        entries.extend([
            "MPI_BCAST",
            "MPI_REDUCE",
            "MPI_ALLREDUCE",
            "MPI_IBCAST",
            "MPI_IREDUCE",
            "MPI_IALLREDUCE",
        ]);
        taken.extend([
            "MPI_Reduce",
            "MPI_Allreduce",
            "MPI_Ireduce",
            "MPI_Iallreduce",
        ]);
    }
    assert_lines(
        &se,
        entries
            .iter()
            .map(|e| format!("rank 0: Fortran {e}: calls ")),
        &ctx,
    );
    for comm in ["MPI_COMM_WORLD", "fsplit"] {
        assert_lines(
            &se,
            taken
                .iter()
                .map(|c| format!("rank 0: {c} on {comm}: taken over (offloaded)")),
            &ctx,
        );
    }
}

fn under(test: &str, mpi: &'static str) {
    let f = match Fortran::build(mpi) {
        Ok(f) => f,
        Err(why) => return common::skip(test, &why),
    };
    // The programs alone: right, and nothing of the library.
    for prog in ["fortran", "fortran_f08"] {
        let (_, se) = f.run(prog, 2, false, if prog == "fortran" { FORTRAN_CHECKS } else { 16 });
        assert!(
            !se.contains("outboard_mpi"),
            "{prog} without the library:\n{se}"
        );
    }
    for n in [2, 4] {
        check_use_mpi(&f, n);
        check_f08(&f, n);
    }
}

#[test]
fn fortran_collectives_under_open_mpi_are_taken_over_and_right() {
    under(
        "fortran_collectives_under_open_mpi_are_taken_over_and_right",
        "openmpi",
    );
}

#[test]
fn fortran_collectives_under_mpich_are_taken_over_and_right() {
    under(
        "fortran_collectives_under_mpich_are_taken_over_and_right",
        "mpich",
    );
}
