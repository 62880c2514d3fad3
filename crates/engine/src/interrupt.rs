//! Selective interrupts (dissertation 6.2.3): the engine interrupts a
//! port's process only for messages marked as needing it
//! (`Command::SendMarked`) and only while the port's interrupt flag - a
//! word in host memory the host stores to, read here - is enabled.
//!
//! A marked delivery only sets the port's `interrupt_pending`; the flag is
//! read when the driver polls ([`Engine::poll_interrupt`]), after it has
//! handed the port its completions. That order closes the lost-wake-up
//! window: a host that enables its flag and then polls its completions
//! either sees the delivery's completion, or the engine reads the enabled
//! flag afterwards and interrupts it.

use crate::{Dma, Engine, Interrupt, PortId};

impl<D: Dma> Engine<D> {
    /// A marked message was delivered to a receive of `port`.
    pub(crate) fn marked_delivered(&mut self, port: PortId) {
        self.stats.marked_delivered += 1;
        if let Some(p) = self.ports.get_mut(usize::from(port.0)) {
            p.interrupt_pending = true;
        }
    }

    /// The next interrupt to deliver, if any: a port that had marked
    /// messages delivered since the last call and whose interrupt flag is
    /// enabled now. Call it after [`Engine::poll_event`] returned `None`
    /// (the completions are the host's before its flag is read). A port
    /// whose flag is disabled or unset is counted in
    /// `Stats::interrupts_suppressed` and not interrupted.
    pub fn poll_interrupt(&mut self) -> Option<Interrupt> {
        for i in 0..self.ports.len() {
            let p = &mut self.ports[i];
            if !p.interrupt_pending {
                continue;
            }
            p.interrupt_pending = false;
            if !p.open {
                continue;
            }
            let port = PortId(i as u8);
            let enabled = match p.interrupt_word {
                Some(addr) => {
                    let mut w = [0u8; 4];
                    self.dma.read(port, addr, &mut w).is_ok() && u32::from_ne_bytes(w) != 0
                }
                None => false,
            };
            if enabled {
                self.stats.interrupts_raised += 1;
                return Some(Interrupt { port });
            }
            self.stats.interrupts_suppressed += 1;
        }
        None
    }
}
