//! The shared libraries an executable names (its `DT_NEEDED` entries),
//! read from the ELF file itself: what `outboard run` looks at to tell an
//! MPI program, without running the loader (`ldd` may execute the
//! program's own loader) or a dependency for a few dozen lines of parsing.
//!
//! 64-bit little-endian ELF only (the machines Outboard runs on); any
//! other file reads as [`ElfError::NotElf64`], which the launcher takes as
//! "not an MPI program we can recognise".

use std::path::Path;

/// Why the needed libraries could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ElfError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What went wrong.
        source: std::io::Error,
    },
    /// Not a 64-bit little-endian ELF file (a script, another format).
    #[error("not a 64-bit little-endian ELF file")]
    NotElf64,
    /// An offset or a size points outside the file.
    #[error("truncated or inconsistent ELF file")]
    Truncated,
}

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;
const DT_STRTAB: u64 = 5;

/// The `DT_NEEDED` names of the ELF file at `path`, in file order (empty
/// for a static executable).
pub fn needed_libraries(path: &Path) -> Result<Vec<String>, ElfError> {
    let bytes = std::fs::read(path).map_err(|source| ElfError::Io { path: path.display().to_string(), source })?;
    needed_in(&bytes)
}

/// [`needed_libraries`] of an ELF image in memory.
pub fn needed_in(b: &[u8]) -> Result<Vec<String>, ElfError> {
    if b.len() < 64 || &b[..4] != b"\x7fELF" || b[4] != 2 || b[5] != 1 {
        return Err(ElfError::NotElf64);
    }
    let phoff = u64_at(b, 0x20)?;
    let phentsize = u64::from(u16_at(b, 0x36)?);
    let phnum = u64::from(u16_at(b, 0x38)?);
    let mut loads = Vec::new();
    let mut dynamic = None;
    for i in 0..phnum {
        let ph = usize::try_from(phoff + i * phentsize).map_err(|_| ElfError::Truncated)?;
        let (kind, offset, vaddr, filesz) = (u32_at(b, ph)?, u64_at(b, ph + 8)?, u64_at(b, ph + 16)?, u64_at(b, ph + 32)?);
        match kind {
            PT_LOAD => loads.push((vaddr, offset, filesz)),
            PT_DYNAMIC => dynamic = Some((offset, filesz)),
            _ => {}
        }
    }
    let Some((dyn_off, dyn_size)) = dynamic else { return Ok(Vec::new()) };
    let mut needed = Vec::new();
    let mut strtab = None;
    for e in 0..dyn_size / 16 {
        let at = usize::try_from(dyn_off + e * 16).map_err(|_| ElfError::Truncated)?;
        let (tag, val) = (u64_at(b, at)?, u64_at(b, at + 8)?);
        match tag {
            DT_NULL => break,
            DT_NEEDED => needed.push(val),
            DT_STRTAB => strtab = Some(val),
            _ => {}
        }
    }
    // The string table is named by its address once loaded: the segment
    // that holds that address says where it lies in the file.
    let strtab = strtab.ok_or(ElfError::Truncated)?;
    let (vaddr, offset, _) = loads.iter().find(|(v, _, size)| (*v..*v + *size).contains(&strtab)).ok_or(ElfError::Truncated)?;
    let table = usize::try_from(strtab - vaddr + offset).map_err(|_| ElfError::Truncated)?;
    needed.iter().map(|&name| c_string(b, table + usize::try_from(name).map_err(|_| ElfError::Truncated)?)).collect()
}

fn slice(b: &[u8], at: usize, len: usize) -> Result<&[u8], ElfError> {
    b.get(at..at.checked_add(len).ok_or(ElfError::Truncated)?).ok_or(ElfError::Truncated)
}

fn u16_at(b: &[u8], at: usize) -> Result<u16, ElfError> {
    Ok(u16::from_le_bytes(slice(b, at, 2)?.try_into().expect("two bytes")))
}

fn u32_at(b: &[u8], at: usize) -> Result<u32, ElfError> {
    Ok(u32::from_le_bytes(slice(b, at, 4)?.try_into().expect("four bytes")))
}

fn u64_at(b: &[u8], at: usize) -> Result<u64, ElfError> {
    Ok(u64::from_le_bytes(slice(b, at, 8)?.try_into().expect("eight bytes")))
}

fn c_string(b: &[u8], at: usize) -> Result<String, ElfError> {
    let rest = b.get(at..).ok_or(ElfError::Truncated)?;
    let end = rest.iter().position(|&c| c == 0).ok_or(ElfError::Truncated)?;
    Ok(String::from_utf8_lossy(&rest[..end]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dynamic_executable_names_the_c_library() {
        let exe = std::env::current_exe().unwrap();
        let needed = needed_libraries(&exe).unwrap();
        assert!(needed.iter().any(|n| n.starts_with("libc.so")), "{needed:?}");
    }

    #[test]
    fn a_script_is_not_elf() {
        assert!(matches!(needed_in(b"#!/bin/sh\necho hi\n"), Err(ElfError::NotElf64)));
        let mut truncated = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        truncated.truncate(100);
        assert!(matches!(needed_in(&truncated), Err(ElfError::Truncated)));
    }
}
