//! The cores an engine may run on. A launcher may bind each rank to one
//! core (Open MPI does for two ranks or fewer, `--bind-to core`; Slurm with
//! `--cpu-bind`), and a thread inherits its process's binding: the engine
//! thread, the node's network processor in this model, would then share
//! its rank's one core, every hand-over between them a context switch
//! (2-rank barrier through the PMPI library here: 14.4 us bound, 6.3 us
//! not), and the progress policy, chosen from the cores the process may
//! use, would see one core. So cores are counted for the node (the
//! cgroup's cpuset, else the online CPUs), and the engine thread leaves the
//! rank's binding for the node's cores.

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

/// CPU numbers in the kernel's list form ("0-3,6,8-9").
fn parse_list(text: &str) -> Vec<usize> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let mut ends = part.splitn(2, '-').map(|n| n.trim().parse::<usize>());
        match (ends.next(), ends.next()) {
            (Some(Ok(a)), None) => cpus.push(a),
            (Some(Ok(a)), Some(Ok(b))) if a <= b => cpus.extend(a..=b),
            _ => return Vec::new(),
        }
    }
    cpus
}

/// The CPUs of this node this process's container may use: its cgroup's
/// cpuset (v2), else every online CPU; empty if neither can be read.
pub fn node_cpus() -> Vec<usize> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok().and_then(|c| {
        c.lines().find_map(|l| l.strip_prefix("0::")).map(|path| format!("/sys/fs/cgroup{}/cpuset.cpus.effective", path.trim_end_matches('/')))
    });
    for file in cgroup.iter().map(String::as_str).chain(["/sys/fs/cgroup/cpuset.cpus.effective", "/sys/devices/system/cpu/online"]) {
        if let Ok(text) = std::fs::read_to_string(file) {
            let cpus = parse_list(&text);
            if !cpus.is_empty() {
                return cpus;
            }
        }
    }
    Vec::new()
}

/// How many cores the node gives this job: [`node_cpus`], or this
/// process's own count if they cannot be read.
pub fn node_cores() -> usize {
    match node_cpus().len() {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
}

/// Moves the calling thread (the engine's) off its rank's binding when its
/// process is bound to fewer cores than the node has: onto the node's
/// other cores, so that a polling engine never shares its rank's core
/// (allowed on every core, a thread started on the rank's core stayed
/// there: a 2-rank barrier took 26.7 us on a 16-core machine against 15.1
/// with the binding kept), or onto all of them if the rank's binding
/// covers them. Best effort: where the kernel refuses, the thread keeps
/// the process's binding.
pub(crate) fn leave_rank_binding() {
    let Ok(current) = sched_getaffinity(Pid::from_raw(0)) else { return };
    let cpus = node_cpus();
    let bound: Vec<usize> = cpus.iter().copied().filter(|&c| current.is_set(c).unwrap_or(false)).collect();
    if cpus.is_empty() || bound.len() >= cpus.len() {
        return;
    }
    let others: Vec<usize> = cpus.iter().copied().filter(|c| !bound.contains(c)).collect();
    let mut set = CpuSet::new();
    for c in if others.is_empty() { cpus } else { others } {
        if set.set(c).is_err() {
            return;
        }
    }
    let _ = sched_setaffinity(Pid::from_raw(0), &set);
}

/// Several nodes emulated on one machine (`outboard run --ranks-per-node`
/// with two or more nodes): the core each node's engine takes, the
/// machine's last ones, node 0 on the last, when the machine has a core
/// for every rank and every engine; `None` when it has not, and then no
/// engine should spin on a core it thinks its own. Each node engine
/// counts the machine's cores as its node's, so without this every one
/// would pin itself to the same last core.
pub fn emulated_engine_cpus(cpus: &[usize], ranks: usize, nodes: usize) -> Option<Vec<usize>> {
    (cpus.len() >= ranks + nodes).then(|| cpus.iter().rev().take(nodes).copied().collect())
}

/// Where a node engine process runs: `cpu` when given
/// (`OUTBOARD_ENGINE_CPU`), else the node's last core when the node has
/// more cores than local ranks (launchers bind ranks from the first core
/// up, so the last is the one left over) when it polls a core of its own
/// (`dedicated`), else anywhere but the binding of the rank that started
/// it. Returns a sentence saying which.
pub(crate) fn place_node_engine(cpu: Option<usize>, local_ranks: usize, dedicated: bool) -> String {
    let cpus = node_cpus();
    let pin = |c: usize| {
        let mut set = CpuSet::new();
        set.set(c).is_ok() && sched_setaffinity(Pid::from_raw(0), &set).is_ok()
    };
    match cpu {
        Some(c) if pin(c) => format!("pinned to cpu {c} (OUTBOARD_ENGINE_CPU)"),
        Some(c) => format!("cpu {c} (OUTBOARD_ENGINE_CPU) is not one this process may run on; left unpinned"),
        None => match cpus.last() {
            Some(&last) if dedicated && cpus.len() > local_ranks && pin(last) => format!("pinned to cpu {last}, the last of {} for {local_ranks} local ranks", cpus.len()),
            _ => {
                leave_rank_binding();
                let why = if dedicated { "leave none to itself" } else { "and an engine that blocks when idle" };
                format!("unpinned: {} cores for {local_ranks} local ranks {why}", cpus.len().max(1))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emulated_nodes_take_the_last_cores_only_when_every_thread_has_one() {
        let cpus: Vec<usize> = (0..16).collect();
        assert_eq!(emulated_engine_cpus(&cpus, 12, 4), Some(vec![15, 14, 13, 12]));
        assert_eq!(emulated_engine_cpus(&cpus, 2, 2), Some(vec![15, 14]));
        assert_eq!(emulated_engine_cpus(&cpus, 14, 2), Some(vec![15, 14]));
        assert_eq!(emulated_engine_cpus(&cpus, 15, 2), None);
        assert_eq!(emulated_engine_cpus(&[0, 1], 2, 2), None);
        assert_eq!(emulated_engine_cpus(&[0, 2, 4, 6], 2, 2), Some(vec![6, 4]));
    }

    #[test]
    fn cpu_lists_parse_as_the_kernel_writes_them() {
        assert_eq!(parse_list("0-3,6,8-9\n"), vec![0, 1, 2, 3, 6, 8, 9]);
        assert_eq!(parse_list("0"), vec![0]);
        assert_eq!(parse_list(""), Vec::<usize>::new());
        assert_eq!(parse_list("3-1"), Vec::<usize>::new());
        assert_eq!(parse_list("a-b"), Vec::<usize>::new());
    }

    /// A thread bound to one core, as a launcher binds a rank, moves to
    /// the node's other cores.
    #[test]
    fn a_thread_bound_to_one_core_leaves_that_binding() {
        let cpus = node_cpus();
        if cpus.len() < 2 {
            return; // nothing to move to on a one-core machine
        }
        std::thread::spawn(move || {
            let mut one = CpuSet::new();
            one.set(cpus[0]).unwrap();
            sched_setaffinity(Pid::from_raw(0), &one).unwrap();
            leave_rank_binding();
            let now = sched_getaffinity(Pid::from_raw(0)).unwrap();
            assert!(!now.is_set(cpus[0]).unwrap(), "still on the rank's core");
            for c in &cpus[1..] {
                assert!(now.is_set(*c).unwrap(), "cpu {c} not allowed after leaving the binding");
            }
        })
        .join()
        .unwrap();
    }
}
