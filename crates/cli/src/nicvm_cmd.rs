//! `outboard nicvm`: check, disassemble and locally run NICVM modules.
//!
//! Uses only the public API of `outboard_nicvm`. A module file is either
//! source text or encoded bytecode (recognised by its magic bytes); bytecode
//! is verified like anything else. Source errors print as `FILE:LINE:COL:`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use outboard_nicvm::bytecode::{Module, MAGIC};
use outboard_nicvm::harness::{parse_hex, Recorder};
use outboard_nicvm::{
    asm, compile_with, verify, DebugInfo, Limits, ModuleInstance, PacketFate, VerifiedModule,
};

/// Fuel for `run` when `--fuel` is not given.
const DEFAULT_FUEL: u64 = 1_000_000;

/// The `nicvm` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum NicvmCommand {
    /// Compile and verify a module; print errors as FILE:LINE:COL.
    Check {
        /// Module source (or encoded bytecode).
        file: PathBuf,
        /// Also write the verified bytecode to this file.
        #[arg(long)]
        emit: Option<PathBuf>,
    },
    /// Print a module's bytecode as assembler text.
    Disasm {
        /// Module source (or encoded bytecode).
        file: PathBuf,
    },
    /// Run a module once for one rank and print its sends, deliveries and result.
    Run {
        /// Module source (or encoded bytecode).
        file: PathBuf,
        /// This node's rank.
        #[arg(long)]
        rank: u32,
        /// Number of ranks in the group.
        #[arg(long)]
        size: u32,
        /// Root rank of the operation.
        #[arg(long, default_value_t = 0)]
        root: u32,
        /// Rank the packet came from (default: this rank, i.e. from the local host).
        #[arg(long)]
        source: Option<u32>,
        /// Packet payload, in hex.
        #[arg(long, default_value = "")]
        payload: String,
        /// Initial accumulator contents, in hex (its length is the accumulator's).
        #[arg(long, default_value = "")]
        acc: String,
        /// Instruction budget for the invocation.
        #[arg(long)]
        fuel: Option<u64>,
    },
}

/// Runs one `nicvm` subcommand.
pub fn run(cmd: NicvmCommand) -> Result<()> {
    match cmd {
        NicvmCommand::Check { file, emit } => {
            let m = load(&file)?;
            let code = m.module.code_len();
            let funcs = m.module.bytecode().functions.len();
            if let Some(out) = emit {
                std::fs::write(&out, m.module.bytecode().encode())
                    .with_context(|| format!("writing {}", out.display()))?;
            }
            println!(
                "{}: ok ({funcs} function(s), {code} instruction(s))",
                file.display()
            );
            Ok(())
        }
        NicvmCommand::Disasm { file } => {
            let m = load(&file)?;
            print!("{}", asm::disassemble(m.module.bytecode()));
            Ok(())
        }
        NicvmCommand::Run {
            file,
            rank,
            size,
            root,
            source,
            payload,
            acc,
            fuel,
        } => {
            if rank >= size || root >= size {
                bail!("--rank and --root must be below --size ({size})");
            }
            let payload = parse_hex(&payload).map_err(|e| anyhow::anyhow!("--payload: {e}"))?;
            let mut acc = parse_hex(&acc).map_err(|e| anyhow::anyhow!("--acc: {e}"))?;
            let m = load(&file)?;
            let mut nic = Recorder::new(rank, size, root);
            if let Some(s) = source {
                nic.source = s;
            }
            let mut inst = ModuleInstance::new(m.module.clone());
            let result = inst.invoke(&mut nic, &payload, &mut acc, fuel.unwrap_or(DEFAULT_FUEL));
            println!(
                "rank {rank} of {size}, root {root}, payload {} byte(s)",
                payload.len()
            );
            for e in &nic.events {
                println!("  {e}");
            }
            match result {
                Ok(out) => {
                    let fate = match out.fate {
                        PacketFate::Deliver => "deliver to host",
                        PacketFate::Consume => "consumed",
                    };
                    println!(
                        "result {} ({}), packet: {fate}, {} instruction(s)",
                        out.result,
                        result_name(out.result),
                        out.instructions
                    );
                    if !acc.is_empty() {
                        println!("accumulator {}", outboard_nicvm::harness::hex(&acc));
                    }
                    Ok(())
                }
                Err(e) => {
                    let mut at = format!("function {}, instruction {}", e.func, e.index);
                    if let Some(debug) = &m.debug {
                        if let Some(pos) = debug.pos(e.func, e.index) {
                            at = format!("{}:{}:{}", file.display(), pos.line, pos.col);
                        }
                    }
                    bail!(
                        "{at}: trap: {} after {} instruction(s); the packet takes its default path",
                        e.kind,
                        e.instructions
                    )
                }
            }
        }
    }
}

fn result_name(v: i64) -> &'static str {
    outboard_nicvm::builtins::CONSTANTS
        .iter()
        .find(|(n, c)| *c == v && n.starts_with("NICVM_RESULT"))
        .map_or("user value", |(n, _)| n)
}

struct Loaded {
    module: Arc<VerifiedModule>,
    debug: Option<DebugInfo>,
}

/// Reads, compiles (if source) and verifies a module file.
fn load(path: &Path) -> Result<Loaded> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let limits = Limits::default();
    if bytes.starts_with(&MAGIC) {
        let m = Module::decode(&bytes).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let v = verify(&m, &limits)
            .map_err(|e| anyhow::anyhow!("{}: verifier: {e}", path.display()))?;
        return Ok(Loaded {
            module: Arc::new(v),
            debug: None,
        });
    }
    let src = String::from_utf8(bytes).map_err(|_| {
        anyhow::anyhow!(
            "{}: neither UTF-8 source nor NICVM bytecode",
            path.display()
        )
    })?;
    match compile_with(&src, &limits) {
        Ok(c) => Ok(Loaded {
            module: c.module,
            debug: Some(c.debug),
        }),
        Err(e) => {
            let mut msg = format!(
                "{}:{}:{}: error: {}",
                path.display(),
                e.pos.line,
                e.pos.col,
                e.kind
            );
            // Show the offending line with a caret under the column.
            if let Some(line) = src.lines().nth((e.pos.line as usize).saturating_sub(1)) {
                let _ = write!(
                    msg,
                    "\n  {line}\n  {}^",
                    " ".repeat((e.pos.col as usize).saturating_sub(1))
                );
            }
            bail!(msg)
        }
    }
}
