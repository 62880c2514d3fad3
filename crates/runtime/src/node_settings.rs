//! The transport settings a node reads from the environment, once, when it
//! starts: through the settings registry, so a bad value stops
//! [`crate::Node::start`] with a sentence instead of being ignored (the
//! old readers turned GSO on for `OUTBOARD_UDP_GSO=0` and fell back on the
//! default, with a line on stderr, for a bad eager threshold).

use outboard_host::RendezvousProtocol;
use outboard_settings::{registry as r, Env, SettingError};

/// What a node's transport takes from the environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NodeSettings {
    /// Segmented UDP sends wanted (`OUTBOARD_UDP_GSO`); used only where the
    /// kernel has them.
    pub gso: bool,
    /// Tagged messages longer than this go by rendezvous
    /// (`OUTBOARD_EAGER_MAX`); `None`: every message eagerly.
    pub eager_max: Option<u32>,
    /// The rendezvous protocol of this node's sends (`OUTBOARD_RNDV`).
    pub rndv: RendezvousProtocol,
}

impl NodeSettings {
    /// Reads them from `env`.
    pub fn read(env: &dyn Env) -> Result<NodeSettings, SettingError> {
        let rndv = match r::RNDV.get(env)? {
            "write" => RendezvousProtocol::Write,
            _ => RendezvousProtocol::Read,
        };
        // The registry bounds the threshold to u32, so the conversion holds.
        let eager_max = r::EAGER_MAX
            .get(env)?
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX));
        Ok(NodeSettings {
            gso: r::UDP_GSO.get(env)?,
            eager_max,
            rndv,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_values() {
        let d = NodeSettings::read(&[]).unwrap();
        assert_eq!(
            d,
            NodeSettings {
                gso: true,
                eager_max: Some(64 << 10),
                rndv: RendezvousProtocol::Read
            }
        );
        let s = NodeSettings::read(&[
            ("OUTBOARD_UDP_GSO", "0"),
            ("OUTBOARD_EAGER_MAX", "off"),
            ("OUTBOARD_RNDV", "write"),
        ])
        .unwrap();
        assert_eq!(
            s,
            NodeSettings {
                gso: false,
                eager_max: None,
                rndv: RendezvousProtocol::Write
            }
        );
        assert_eq!(
            NodeSettings::read(&[("OUTBOARD_EAGER_MAX", "32K")])
                .unwrap()
                .eager_max,
            Some(32768)
        );
        let e = NodeSettings::read(&[("OUTBOARD_EAGER_MAX", "lots")])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("OUTBOARD_EAGER_MAX=\"lots\" is not a size"),
            "{e}"
        );
        // Every name the registry accepts is one the host library knows.
        for name in ["read", "get", "write", "put"] {
            let ours = NodeSettings::read(&[("OUTBOARD_RNDV", name)]).unwrap().rndv;
            assert_eq!(Ok(ours), name.parse::<RendezvousProtocol>());
        }
    }
}
