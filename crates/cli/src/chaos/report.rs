//! What the trials' output says: the engines' counters (from the
//! `outboard stats rank R:` table ranks print with `OUTBOARD_STATS=stderr`,
//! where the runtime supports it) and the ranks an error names.

use std::collections::BTreeMap;

/// Counters summed over ranks, by name.
pub type Counters = BTreeMap<String, u64>;

/// Adds the counters of every `outboard stats rank R:` table in `stderr`
/// (a header line, then one `counter value` line per counter that is not
/// 0) to `into`; how many tables there were.
pub fn add_stats(stderr: &str, into: &mut Counters) -> usize {
    let mut tables = 0;
    for line in stderr.lines() {
        let Some(rest) = line.strip_prefix("outboard stats rank ") else { continue };
        let Some((_, row)) = rest.split_once(": ") else { continue };
        if row.starts_with("engine counters") {
            tables += 1;
            continue;
        }
        // `first_failed rank k` is no count.
        if let [name, value] = row.split_whitespace().collect::<Vec<_>>()[..] {
            if let Ok(v) = value.parse::<u64>() {
                *into.entry(name.to_string()).or_default() += v;
            }
        }
    }
    tables
}

/// The counters that tell of rejected or suspicious input: names with
/// one of these words in them.
pub fn drop_counters(c: &Counters) -> Vec<(&str, u64)> {
    const WORDS: [&str; 10] = ["malformed", "wrong_job", "misaddressed", "stale", "mac", "auth", "duplicates", "replay", "restart", "incarnation"];
    c.iter().filter(|(k, v)| **v > 0 && WORDS.iter().any(|w| k.contains(w))).map(|(k, v)| (k.as_str(), *v)).collect()
}

/// Whether a line of a rank's stderr is a counter table or a node
/// engine's report (`outboard stats ...`, `outboard node engine ...`),
/// not an error.
pub fn is_report(line: &str) -> bool {
    line.starts_with("outboard stats") || line.starts_with("outboard node engine")
}

/// The ranks an error text names (`rank k`, `peer k`, and a node's
/// `ranks a, b`), in the order the text names them, other than `me` (a
/// rank's report starts with its own rank) and leaving out reports
/// ([`is_report`]).
pub fn ranks_named(text: &str, me: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for line in text.lines().filter(|l| !is_report(l)) {
        let mut at: Vec<(usize, u32)> = Vec::new();
        for pat in ["rank ", "peer "] {
            for (i, _) in line.match_indices(pat) {
                let digits: String = line[i + pat.len()..].chars().take_while(char::is_ascii_digit).collect();
                if let Ok(k) = digits.parse() {
                    at.push((i, k));
                }
            }
        }
        // `node 1 (ranks 2, 3)`: every rank listed, in order.
        for (i, _) in line.match_indices("ranks ") {
            let list = &line[i + "ranks ".len()..];
            for (offset, part) in (i..).zip(list.split(", ")) {
                let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
                let Ok(k) = digits.parse() else { break };
                at.push((offset, k));
                if digits.len() != part.len() {
                    break;
                }
            }
        }
        at.sort_unstable();
        for (_, k) in at {
            if k != me && !found.contains(&k) {
                found.push(k);
            }
        }
    }
    found
}

/// Whether an error text shows Rust's debug formatting (`NodeId(3)`,
/// `Op(PeerUnreachable(..))`, `Stats { .. }`) instead of words.
pub fn debug_formatted(text: &str) -> bool {
    text.lines().filter(|l| !is_report(l)).any(|l| ["NodeId(", "Error(", " { ", "(\""].iter().any(|p| l.contains(p)))
}

/// Minimum, median, 90th percentile and maximum of `v` (nearest rank).
pub fn spread(v: &mut [f64]) -> Option<[f64; 4]> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    Some([v[0], at(0.5), at(0.9), v[v.len() - 1]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_tables_are_summed_by_counter() {
        let mut c = Counters::new();
        let text = "noise\nouttboard\noutboard stats rank 0: engine counters that are not 0\n\
                    outboard stats rank 0:   malformed      2\n\
                    outboard stats rank 0:   stale_boot     5\n\
                    outboard stats rank 0:   first_failed   rank 3\n\
                    outboard stats rank 1: engine counters that are not 0\n\
                    outboard stats rank 1:   malformed      1\n\
                    outboard stats rank 1:   packets_in     9\n";
        assert_eq!(add_stats(text, &mut c), 2);
        assert_eq!((c["malformed"], c["stale_boot"], c["packets_in"]), (3, 5, 9));
        assert!(!c.contains_key("first_failed"));
        assert_eq!(drop_counters(&c), vec![("malformed", 3), ("stale_boot", 5)]);
    }

    #[test]
    fn named_ranks_leave_out_the_writer_in_text_order() {
        assert_eq!(ranks_named("rank 2 gives up: rank 3 failed first; rank 1 is unreachable", 2), vec![3, 1]);
        assert_eq!(ranks_named("peer 4 then rank 0", 1), vec![4, 0]);
        assert_eq!(ranks_named("Error: rank 3 left the job: closed", 1), vec![3]);
        assert!(ranks_named("Error: rendezvous at 10.77.0.1:29500 lost", 1).is_empty());
        assert!(ranks_named("# rank 1 engine: 3 retransmits\noutboard stats rank 1:   first_failed   rank 2", 1).is_empty());
        // A node engine's node, by its ranks; a node engine's report is
        // not an error.
        assert_eq!(ranks_named("rank 1 gives up: node 1 (ranks 2, 3) failed first; rank 0 closed its port", 1), vec![2, 3, 0]);
        assert!(ranks_named("outboard node engine 0: rank 2 attached", 1).is_empty());
    }

    #[test]
    fn debug_formatting_is_recognised() {
        assert!(debug_formatted("rank 2: peer node NodeId(3) is unreachable"));
        assert!(debug_formatted("Error: Bootstrap(RankLost { rank: 2, reason: \"closed\" })"));
        assert!(!debug_formatted("rank 2 gives up: rank 3 failed first; rank 3 is unreachable"));
        assert!(!debug_formatted("outboard stats rank 1: Stats { a: 1 }"));
    }

    #[test]
    fn spread_takes_nearest_ranks() {
        let mut v: Vec<f64> = (1..=10).map(f64::from).rev().collect();
        assert_eq!(spread(&mut v), Some([1.0, 5.0, 9.0, 10.0]));
        assert_eq!(spread(&mut []), None);
    }
}
