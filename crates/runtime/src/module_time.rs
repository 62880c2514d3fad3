//! Module time: how long the engine calls that ran NICVM module
//! instructions took, by the monotonic clock. The sans-IO engine has no
//! clock (it counts instructions in `Stats::vm_instructions`); the driver
//! times the calls it makes. The clock is read only while the job has a
//! module loaded on this engine, and a call's time is kept only if it ran
//! VM instructions, so a job without modules pays nothing. A call's time
//! includes the rest of that call's work (parsing the packet, queueing
//! the module's sends): an upper bound of the modules' own time.

use std::time::Instant as Monotonic;

use outboard_engine::{Dma, Engine};

/// Accumulated module time (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModuleTime {
    /// Nanoseconds spent in engine calls that ran VM instructions.
    pub ns: u64,
    /// How many such calls.
    pub calls: u64,
}

impl ModuleTime {
    /// Runs `f` on `engine`, timing it if it may run a module.
    pub(crate) fn run<D: Dma, R>(&mut self, engine: &mut Engine<D>, f: impl FnOnce(&mut Engine<D>) -> R) -> R {
        if !engine.nicvm_active() {
            return f(engine);
        }
        let before = engine.stats().vm_instructions;
        let start = Monotonic::now();
        let r = f(engine);
        if engine.stats().vm_instructions != before {
            self.ns += u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.calls += 1;
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use outboard_engine::{Command, Completion, EngineConfig, GroupId, Instant, MemberList, ModuleId, NodeId, OpId, PortId, VecMemory};

    const NOOP: &str = include_str!("../../nicvm/modules/noop.nvm");

    fn drain(e: &mut Engine<VecMemory>) -> Vec<Completion> {
        std::iter::from_fn(|| e.poll_event()).map(|ev| ev.result.expect("command succeeds")).collect()
    }

    #[test]
    fn only_calls_that_run_a_module_are_timed() {
        let now = Instant::ZERO;
        let mut e = Engine::new(EngineConfig::new(NodeId(0), 1, 0), VecMemory::new(), now).unwrap();
        let p = PortId(0);
        let me = e.open_port(now, p).unwrap();
        let mut t = ModuleTime::default();
        let g = GroupId(3);
        let members = e.dma_mut().alloc_with(&MemberList::from_endpoints([me]).encode());
        t.run(&mut e, |e| e.handle_command(now, p, Command::CreateGroup { op: OpId(1), group: g, rank: 0, members }).unwrap());
        let code = outboard_nicvm::compile(NOOP).unwrap().module.bytecode().encode();
        let (name, code) = (e.dma_mut().alloc_with(b"noop"), e.dma_mut().alloc_with(&code));
        let m = ModuleId(4);
        let load = Command::NicvmLoad { op: OpId(2), module: m, name, code, acc_len: 0, persist: false, replace: false };
        t.run(&mut e, |e| e.handle_command(now, p, load).unwrap());
        assert_eq!(t, ModuleTime::default(), "no module ran yet");
        let buf = e.dma_mut().alloc_with(b"packet");
        let send = Command::NicvmSend { op: OpId(3), module: m, generation: 1, group: g, root: 0, dest: 0, buf };
        t.run(&mut e, |e| e.handle_command(now, p, send).unwrap());
        assert_eq!(t.calls, 1, "the local module ran once");
        assert!(e.stats().vm_instructions > 0);
        let done = drain(&mut e);
        assert!(done.contains(&Completion::NicvmSent { failed: false }), "{done:?}");
    }
}
