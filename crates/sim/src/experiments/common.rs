//! Helpers several experiments share: where a node's first port is, and a
//! multi-send waited for.
//!
//! Experiments are applications of the host library: they reach the
//! engine through [`Port`]'s calls (multi-send included, see
//! [`Port::start_multi_send`]), never by posting engine commands.

use outboard_engine::{Endpoint, NodeId, PortId};
use outboard_host::{HostError, Port};

use crate::process::{Proc, SimIo};

/// The endpoint of port 0 on `node` after its first open.
pub(crate) fn first_port(node: u32) -> Endpoint {
    Endpoint { node: NodeId(node), port: PortId(0), gen: 1 }
}

/// One multi-send of `data` to `dests` with `tag`, waited for.
pub async fn multi_send_once(
    p: &Proc,
    port: &mut Port<SimIo>,
    dests: &[Endpoint],
    tag: u64,
    data: &[u8],
) -> Result<(), HostError> {
    let ms = port.start_multi_send(dests, tag, data)?;
    p.wait_multi_send(port, ms).await
}
