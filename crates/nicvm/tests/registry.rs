//! The module registry: several modules, replace, purge, list, persistence
//! past the job, and who may load.

use outboard_nicvm::harness::Recorder;
use outboard_nicvm::{
    compile, LoadOptions, ModuleCode, Registry, RegistryError, RegistryLimits, Requester,
};

const JOB_A: u64 = 0xA11CE;
const JOB_B: u64 = 0xB0B;

fn returns(v: i64) -> String {
    format!("func main() return {v}; end func;")
}

fn registry() -> Registry {
    let mut r = Registry::new(RegistryLimits::default());
    r.port_opened(1, JOB_A);
    r.port_opened(2, JOB_A);
    r.port_opened(3, JOB_B);
    r
}

fn run(r: &mut Registry, name: &str, job: u64) -> Result<i64, RegistryError> {
    r.invoke(name, job, &mut Recorder::new(0, 1, 0), &[], &mut [], 1000)
        .map(|o| o.result)
}

#[test]
fn several_modules_load_list_and_run() {
    let mut r = registry();
    let opts = LoadOptions::default();
    r.load(
        Requester::Port(1),
        "one",
        ModuleCode::Source(&returns(1)),
        opts,
    )
    .unwrap();
    let bytes = compile(&returns(2)).unwrap().bytecode().encode();
    r.load(
        Requester::Port(2),
        "two",
        ModuleCode::Bytecode(&bytes),
        opts,
    )
    .unwrap();
    let verified = compile(&returns(3)).unwrap().module;
    r.load(
        Requester::Port(3),
        "three",
        ModuleCode::Verified(verified),
        opts,
    )
    .unwrap();
    let names: Vec<_> = r.list().into_iter().map(|m| (m.name, m.job)).collect();
    assert_eq!(
        names,
        vec![
            ("one".into(), JOB_A),
            ("three".into(), JOB_B),
            ("two".into(), JOB_A)
        ]
    );
    assert_eq!(run(&mut r, "one", JOB_A).unwrap(), 1);
    assert_eq!(run(&mut r, "two", JOB_A).unwrap(), 2);
    assert_eq!(run(&mut r, "three", JOB_B).unwrap(), 3);
    // Another job's packets cannot drive a module.
    assert_eq!(run(&mut r, "one", JOB_B), Err(RegistryError::NotAuthorized));
    assert!(matches!(
        run(&mut r, "nope", JOB_A),
        Err(RegistryError::NotFound(_))
    ));
}

#[test]
fn replace_needs_the_flag_and_the_same_job_and_resets_state() {
    let mut r = registry();
    let counter = "var n; func main() n = n + 1; return n; end func;";
    r.load(
        Requester::Port(1),
        "m",
        ModuleCode::Source(counter),
        LoadOptions::default(),
    )
    .unwrap();
    assert_eq!(run(&mut r, "m", JOB_A).unwrap(), 1);
    assert_eq!(run(&mut r, "m", JOB_A).unwrap(), 2);
    assert!(matches!(
        r.load(
            Requester::Port(1),
            "m",
            ModuleCode::Source(counter),
            LoadOptions::default()
        ),
        Err(RegistryError::NameTaken(_))
    ));
    let replace = LoadOptions {
        replace: true,
        ..LoadOptions::default()
    };
    assert!(matches!(
        r.load(
            Requester::Port(3),
            "m",
            ModuleCode::Source(counter),
            replace
        ),
        Err(RegistryError::NameTaken(_))
    ));
    r.load(
        Requester::Port(2),
        "m",
        ModuleCode::Source(counter),
        replace,
    )
    .unwrap();
    assert_eq!(
        run(&mut r, "m", JOB_A).unwrap(),
        1,
        "fresh module variables"
    );
}

#[test]
fn bad_modules_are_rejected_with_their_reason() {
    let mut r = registry();
    let opts = LoadOptions::default();
    assert!(matches!(
        r.load(Requester::Port(1), "m", ModuleCode::Source("func main() return x; end func;"), opts),
        Err(RegistryError::Compile(e)) if e.pos.col == 20
    ));
    assert!(matches!(
        r.load(
            Requester::Port(1),
            "m",
            ModuleCode::Bytecode(b"not a module"),
            opts
        ),
        Err(RegistryError::Decode(_))
    ));
    let mut bad = compile(&returns(1)).unwrap().bytecode().clone();
    bad.functions[0]
        .code
        .insert(0, outboard_nicvm::bytecode::Insn::AddI);
    assert!(matches!(
        r.load(Requester::Port(1), "m", ModuleCode::Bytecode(&bad.encode()), opts),
        Err(RegistryError::Verify(e)) if e.index == Some(0)
    ));
    for name in ["", "has space", &"x".repeat(65)] {
        assert_eq!(
            r.load(
                Requester::Port(1),
                name,
                ModuleCode::Source(&returns(1)),
                opts
            ),
            Err(RegistryError::BadName)
        );
    }
    assert!(r.list().is_empty());
}

#[test]
fn loads_need_a_port_of_the_job_or_its_key() {
    let mut r = registry();
    let opts = LoadOptions::default();
    let src = returns(5);
    // An unknown port, or a key of no job on this node, may not load.
    assert_eq!(
        r.load(Requester::Port(99), "m", ModuleCode::Source(&src), opts),
        Err(RegistryError::NotAuthorized)
    );
    assert_eq!(
        r.load(
            Requester::Remote(0xBAD),
            "m",
            ModuleCode::Source(&src),
            opts
        ),
        Err(RegistryError::NotAuthorized)
    );
    // A remote node with the job's key may.
    r.load(
        Requester::Remote(JOB_A),
        "m",
        ModuleCode::Source(&src),
        opts,
    )
    .unwrap();
    assert_eq!(r.list()[0].job, JOB_A);
    // Only the owning job may purge.
    assert_eq!(
        r.purge(Requester::Port(3), "m"),
        Err(RegistryError::NotAuthorized)
    );
    assert_eq!(
        r.purge(Requester::Remote(JOB_B), "m"),
        Err(RegistryError::NotAuthorized)
    );
    r.purge(Requester::Port(2), "m").unwrap();
    assert!(r.list().is_empty());
    assert!(matches!(
        r.purge(Requester::Port(2), "m"),
        Err(RegistryError::NotFound(_))
    ));
}

#[test]
fn modules_end_with_their_job_unless_persistent() {
    let mut r = registry();
    let persist = LoadOptions {
        persist: true,
        ..LoadOptions::default()
    };
    r.load(
        Requester::Port(1),
        "temp",
        ModuleCode::Source(&returns(1)),
        LoadOptions::default(),
    )
    .unwrap();
    r.load(
        Requester::Port(1),
        "keep",
        ModuleCode::Source(&returns(2)),
        persist,
    )
    .unwrap();
    r.load(
        Requester::Port(3),
        "other",
        ModuleCode::Source(&returns(3)),
        LoadOptions::default(),
    )
    .unwrap();
    // The loading port closes, but job A still has port 2: nothing goes.
    assert!(r.port_closed(1).is_empty());
    assert_eq!(r.list().len(), 3);
    // Job A's last port closes: its non-persistent module is purged.
    assert_eq!(r.port_closed(2), vec!["temp".to_string()]);
    let names: Vec<_> = r.list().into_iter().map(|m| m.name).collect();
    assert_eq!(names, vec!["keep", "other"]);
    // The persistent one still runs for its job's packets, and its key can purge it.
    assert_eq!(run(&mut r, "keep", JOB_A).unwrap(), 2);
    r.purge(Requester::Remote(JOB_A), "keep").unwrap();
    // end_job is the explicit form.
    assert_eq!(r.end_job(JOB_B), vec!["other".to_string()]);
    assert!(r.list().is_empty());
}

#[test]
fn registry_limits_hold() {
    let mut r = Registry::new(RegistryLimits {
        max_modules: 2,
        max_total_code: 10,
        ..RegistryLimits::default()
    });
    r.port_opened(1, JOB_A);
    let opts = LoadOptions::default();
    r.load(
        Requester::Port(1),
        "a",
        ModuleCode::Source(&returns(1)),
        opts,
    )
    .unwrap();
    r.load(
        Requester::Port(1),
        "b",
        ModuleCode::Source(&returns(2)),
        opts,
    )
    .unwrap();
    assert_eq!(
        r.load(
            Requester::Port(1),
            "c",
            ModuleCode::Source(&returns(3)),
            opts
        ),
        Err(RegistryError::Full("module count"))
    );
    let big = format!(
        "func main() var x; {} return x; end func;",
        "x = x + 1;".repeat(5)
    );
    let replace = LoadOptions {
        replace: true,
        ..opts
    };
    assert_eq!(
        r.load(Requester::Port(1), "a", ModuleCode::Source(&big), replace),
        Err(RegistryError::Full("code size"))
    );
}
