//! `outboard demo`, run as a user runs it: every size it advertises
//! completes with every message checked, and its counters agree.

use std::process::Command;

const OUTBOARD: &str = env!("CARGO_BIN_EXE_outboard");

/// Runs `outboard demo` with `args`; its stdout, after checking it
/// succeeded.
fn demo(args: &[&str]) -> String {
    let out = Command::new(OUTBOARD).arg("demo").args(args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "outboard demo {args:?} failed:\n{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("every message delivered exactly once and intact"), "{text}");
    text
}

/// The number before `word` on the line that starts (after spaces) with
/// `line`.
fn count(text: &str, line: &str, word: &str) -> u64 {
    let l = text.lines().find(|l| l.trim_start().starts_with(line)).unwrap_or_else(|| panic!("no {line:?} line in:\n{text}"));
    let at = l.find(word).unwrap_or_else(|| panic!("no {word:?} in {l:?}"));
    l[..at]
        .split_whitespace()
        .last()
        .and_then(|n| n.trim_end_matches(':').parse().ok())
        .unwrap_or_else(|| panic!("no number before {word:?} in {l:?}"))
}

#[test]
fn more_messages_than_a_port_has_receive_tokens_all_arrive() {
    // 7 peers x 40 messages = 280 receives per node, past the 256 tokens.
    let text = demo(&["--messages", "40"]);
    assert!(text.contains("2240 messages of 16384 B"), "{text}");
}

#[test]
fn more_nodes_than_a_port_has_receive_tokens_all_arrive() {
    // 299 receives per node, one from each peer.
    let text = demo(&["--nodes", "300", "--messages", "1", "--size", "64"]);
    assert!(text.contains("300 engines, all-to-all, 89700 messages of 64 B"), "{text}");
}

#[test]
fn every_corrupted_datagram_is_counted_where_it_was_dropped() {
    let text = demo(&["--seed", "7"]);
    let corrupted = count(&text, "datagrams", "corrupted");
    let duplicated = count(&text, "datagrams", "duplicated");
    let dropped = count(&text, "corrupt datagrams", "dropped");
    let mac = count(&text, "corrupt datagrams", "failed the MAC");
    let malformed = count(&text, "corrupt datagrams", "malformed");
    assert!(corrupted > 0, "{text}");
    assert_eq!(dropped, mac + malformed, "{text}");
    // Each corrupted datagram is dropped once, or twice when the link
    // also duplicated it.
    assert!((corrupted..=corrupted + duplicated).contains(&dropped), "{text}");
}
