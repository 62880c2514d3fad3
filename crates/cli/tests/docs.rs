//! The documentation as a reader meets it: README.md, ARCHITECTURE.md and
//! the guide in docs/ (an mdBook).
//!
//! - every relative link resolves to a file, and a `#anchor` into a
//!   Markdown file to one of its headings (GitHub's slugs);
//! - docs/SUMMARY.md lists every page of the guide, and every page it
//!   lists exists;
//! - every fenced block whose info string is `sh tested` runs, with
//!   `bash -e`, in a fresh directory, with this build's `outboard` first on
//!   the PATH;
//! - `mdbook build docs` succeeds, where mdbook is installed.
//!
//! Markdown is parsed by hand: fenced code blocks, code spans, inline links
//! and ATX headings are all the pages use.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// README.md, ARCHITECTURE.md and every Markdown file under docs/, as
/// paths relative to the repository.
fn pages() -> Vec<PathBuf> {
    let root = repo();
    let mut out = vec![PathBuf::from("README.md"), PathBuf::from("ARCHITECTURE.md")];
    let mut stack = vec![root.join("docs")];
    let mut found = Vec::new();
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                found.push(p.strip_prefix(&root).unwrap().to_path_buf());
            }
        }
    }
    found.sort();
    out.extend(found);
    out
}

fn read(rel: &Path) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{}: {e}", rel.display()))
}

/// A fenced code block: its info string, the line of its opening fence
/// (1-based) and its text.
struct Fence {
    info: String,
    line: usize,
    body: String,
}

/// The text with code blocks and code spans blanked (newlines kept, so
/// byte offsets still give line numbers), and the fenced blocks.
fn split_code(text: &str) -> (String, Vec<Fence>) {
    let mut prose = String::with_capacity(text.len());
    let mut fences = Vec::new();
    let mut open: Option<(String, usize, Fence)> = None; // (fence marker, indent, block)
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let marker: String = trimmed.chars().take_while(|&c| c == '`' || c == '~').collect();
        let is_fence = indent < 4 && marker.len() >= 3 && marker.chars().all(|c| c == marker.chars().next().unwrap());
        match &mut open {
            Some((m, _, block)) => {
                if is_fence && marker.starts_with(m.as_str()) && trimmed[marker.len()..].trim().is_empty() {
                    let (_, _, block) = open.take().unwrap();
                    fences.push(block);
                } else {
                    block.body.push_str(line);
                }
                prose.extend(line.chars().map(|c| if c == '\n' { '\n' } else { ' ' }));
            }
            None if is_fence => {
                let info = trimmed[marker.len()..].trim().to_string();
                open = Some((marker, indent, Fence { info, line: i + 1, body: String::new() }));
                prose.extend(line.chars().map(|c| if c == '\n' { '\n' } else { ' ' }));
            }
            None => prose.push_str(line),
        }
    }
    if let Some((_, _, block)) = open {
        fences.push(block);
    }
    (blank_code_spans(&prose), fences)
}

/// Blanks every code span (a run of backticks up to the next run of the
/// same length), which may cross lines.
fn blank_code_spans(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'`' {
            i += 1;
            continue;
        }
        let run = b[i..].iter().take_while(|&&c| c == b'`').count();
        let mut j = i + run;
        let mut close = None;
        while j < b.len() {
            if b[j] == b'`' {
                let r = b[j..].iter().take_while(|&&c| c == b'`').count();
                if r == run {
                    close = Some(j);
                    break;
                }
                j += r;
            } else {
                j += 1;
            }
        }
        match close {
            Some(j) => {
                for c in &mut out[i..j + run] {
                    if *c != b'\n' {
                        *c = b' ';
                    }
                }
                i = j + run;
            }
            None => i += run,
        }
    }
    // Only ASCII bytes were replaced by ASCII, so this stays UTF-8.
    String::from_utf8(out).unwrap()
}

/// Inline link and image targets, with their line numbers.
fn links(prose: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let b = prose.as_bytes();
    let mut i = 0;
    while let Some(k) = prose[i..].find("](") {
        let start = i + k + 2;
        let mut depth = 0usize;
        let mut end = start;
        while end < b.len() {
            match b[end] {
                b'(' => depth += 1,
                b')' if depth == 0 => break,
                b')' => depth -= 1,
                b'\n' => break,
                _ => {}
            }
            end += 1;
        }
        let inside = prose[start..end].trim();
        // A title after the target: `[x](path "title")`.
        let target = inside.split_whitespace().next().unwrap_or("").trim_matches(|c| c == '<' || c == '>');
        if !target.is_empty() {
            out.push((prose[..start].matches('\n').count() + 1, target.to_string()));
        }
        i = end.max(start);
    }
    out
}

/// GitHub's (and mdBook's) heading ids: lowercase, spaces to '-', every
/// character but letters, digits, '-' and '_' dropped; a repeated slug
/// gets -1, -2, ...
fn slugs(prose: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for line in prose.lines() {
        let t = line.trim_start();
        if line.len() - t.len() > 3 || !t.starts_with('#') {
            continue;
        }
        let hashes = t.chars().take_while(|&c| c == '#').count();
        if hashes > 6 || !(t.len() == hashes || t[hashes..].starts_with(' ')) {
            continue;
        }
        let title = t[hashes..].trim().trim_end_matches('#').trim();
        let slug: String = title
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        let n = seen.entry(slug.clone()).or_insert(0);
        out.insert(if *n == 0 { slug.clone() } else { format!("{slug}-{n}") });
        *n += 1;
    }
    out
}

/// Headings as slugs; code spans in a heading keep their text.
fn heading_slugs(text: &str) -> BTreeSet<String> {
    // Code spans keep their words in an id: skip only the code blocks.
    let mut in_fence = false;
    let mut kept = String::new();
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            in_fence = !in_fence;
            continue;
        }
        if !in_fence {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    slugs(&kept)
}

fn is_external(target: &str) -> bool {
    target.contains("://") || target.starts_with("mailto:")
}

#[test]
fn every_relative_link_resolves() {
    let root = repo();
    let mut bad = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = read(&page);
        let (prose, _) = split_code(&text);
        for (line, target) in links(&prose) {
            if is_external(&target) {
                continue;
            }
            checked += 1;
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                root.join(&page)
            } else {
                root.join(page.parent().unwrap()).join(path)
            };
            if !file.exists() {
                bad.push(format!("{}:{line}: {target}: no such file ({})", page.display(), file.display()));
                continue;
            }
            if let Some(anchor) = anchor {
                if file.extension().is_some_and(|x| x == "md") {
                    let ids = heading_slugs(&std::fs::read_to_string(&file).unwrap());
                    if !ids.contains(anchor) {
                        bad.push(format!(
                            "{}:{line}: {target}: no heading with the id `{anchor}` in {}",
                            page.display(),
                            file.strip_prefix(&root).unwrap_or(&file).display()
                        ));
                    }
                }
            }
        }
    }
    assert!(checked > 50, "only {checked} links found: is the parser broken?");
    assert!(bad.is_empty(), "broken links:\n{}", bad.join("\n"));
}

#[test]
fn the_summary_lists_every_page() {
    let root = repo();
    let summary = read(Path::new("docs/SUMMARY.md"));
    let (prose, _) = split_code(&summary);
    let mut listed = BTreeSet::new();
    let mut bad = Vec::new();
    for (line, target) in links(&prose) {
        let path = target.split('#').next().unwrap();
        if !root.join("docs").join(path).is_file() {
            bad.push(format!("docs/SUMMARY.md:{line}: lists {target}, which does not exist"));
        }
        listed.insert(PathBuf::from("docs").join(path));
    }
    for page in pages() {
        let under_docs = page.starts_with("docs");
        let is_figures = page.starts_with("docs/figures");
        if under_docs && !is_figures && page != Path::new("docs/SUMMARY.md") && !listed.contains(&page) {
            bad.push(format!("{} is not listed in docs/SUMMARY.md", page.display()));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// Runs `script` with `bash -e` in a fresh directory, this build's
/// `outboard` first on the PATH; gives up after `limit`.
fn run_block(script: &str, limit: Duration) -> Result<String, String> {
    use std::os::unix::process::CommandExt as _;
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("outboard-docs-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_outboard")).parent().unwrap();
    let path = match std::env::var_os("PATH") {
        Some(p) => {
            let mut dirs = vec![bin_dir.to_path_buf()];
            dirs.extend(std::env::split_paths(&p));
            std::env::join_paths(dirs).unwrap()
        }
        None => bin_dir.as_os_str().to_owned(),
    };
    let script_file = dir.join("block.sh");
    std::fs::write(&script_file, script).unwrap();
    let log = dir.join("output.log");
    let out = std::fs::File::create(&log).unwrap();
    let mut child = Command::new("bash")
        .arg("-e")
        .arg(&script_file)
        .current_dir(&dir)
        .env("PATH", path)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start bash: {e}"))?;
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if start.elapsed() > limit {
            // The block's whole process group: `outboard run` has children.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    match status {
        Some(s) if s.success() => Ok(output),
        Some(s) => Err(format!("exited with {s}; output:\n{output}")),
        None => Err(format!("still running after {} s; output so far:\n{output}", limit.as_secs())),
    }
}

#[test]
fn every_tested_shell_block_runs() {
    let mut failures = Vec::new();
    let mut ran = 0;
    for page in pages() {
        let text = read(&page);
        let (_, fences) = split_code(&text);
        for f in fences {
            let mut words = f.info.split_whitespace();
            if !(words.next() == Some("sh") && words.any(|w| w == "tested")) {
                continue;
            }
            ran += 1;
            if let Err(e) = run_block(&f.body, Duration::from_secs(60)) {
                failures.push(format!("{}:{}: the `sh tested` block\n{}failed: {e}", page.display(), f.line, f.body));
            }
        }
    }
    assert!(ran > 0, "no `sh tested` block found in README.md or docs/");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_book_builds() {
    match Command::new("mdbook").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status() {
        Ok(s) if s.success() => {}
        _ => {
            common::skip(
                "the_book_builds",
                "mdbook is not on the PATH (cargo install mdbook --locked)",
            );
            return;
        }
    }
    let out_dir = std::env::temp_dir().join(format!("outboard-book-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out_dir);
    let out = Command::new("mdbook")
        .arg("build")
        .arg(repo().join("docs"))
        .arg("--dest-dir")
        .arg(&out_dir)
        .output()
        .expect("mdbook runs");
    let built = out_dir.join("index.html").is_file();
    let _ = std::fs::remove_dir_all(&out_dir);
    assert!(
        out.status.success() && built,
        "mdbook build docs failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
