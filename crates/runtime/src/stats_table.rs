//! The engine's counters as the table `OUTBOARD_STATS=stderr` prints when
//! a rank leaves.
//!
//! Each line starts `outboard stats rank R:`, so a rank's lines stay
//! recognisable among other ranks' output (and `outboard chaos` can sum
//! them); only the counters that are not 0 are listed, by their field
//! names in [`Stats`], whose documentation says what each counts.

use std::fmt::Write as _;

use outboard_engine::Stats;

/// The first line of a rank's table, after the `outboard stats rank R`
/// prefix.
pub const HEADER: &str = "engine counters that are not 0";

/// `stats` of rank `rank` as lines of `counter value`, aligned.
pub fn stats_table(rank: u32, stats: &Stats) -> String {
    let rows = rows(stats);
    let width = rows.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    let mut out = format!("outboard stats rank {rank}: {HEADER}\n");
    for (name, value) in rows {
        let _ = writeln!(out, "outboard stats rank {rank}:   {name:<width$} {value:>12}");
    }
    out
}

/// The counters that are not 0, and the first failure, in the order of
/// their fields. Destructured without `..`: a counter added to [`Stats`]
/// does not compile here until the table shows it.
fn rows(stats: &Stats) -> Vec<(&'static str, String)> {
    let Stats {
        malformed,
        unauthenticated,
        misaddressed,
        stale_boot,
        duplicates,
        out_of_order,
        retransmits,
        timeouts,
        rejected_not_ready,
        rejected_port,
        access_violations,
        retries,
        peers_failed,
        first_failed,
        keepalives,
        notices_sent,
        notices_received,
        notices_about_self,
        departures,
        notices_ignored,
        port_closures_sent,
        port_closures_received,
        atomics_executed,
        atomic_duplicates,
        atomic_stale,
        unexpected,
        unexpected_bytes_copied,
        coll_unexpected,
        coll_refused,
        coll_resumes_sent,
        coll_resumes_received,
        coll_unmatched,
        coll_abandoned,
        coll_deferred,
        coll_forwarded_early,
        nicvm_invocations,
        marked_delivered,
        interrupts_raised,
        interrupts_suppressed,
        vm_instructions,
        nicvm_errors,
    } = stats;
    let counters = [
        ("malformed", malformed),
        ("unauthenticated", unauthenticated),
        ("misaddressed", misaddressed),
        ("stale_boot", stale_boot),
        ("duplicates", duplicates),
        ("out_of_order", out_of_order),
        ("retransmits", retransmits),
        ("timeouts", timeouts),
        ("rejected_not_ready", rejected_not_ready),
        ("rejected_port", rejected_port),
        ("access_violations", access_violations),
        ("retries", retries),
        ("peers_failed", peers_failed),
        ("keepalives", keepalives),
        ("notices_sent", notices_sent),
        ("notices_received", notices_received),
        ("notices_about_self", notices_about_self),
        ("departures", departures),
        ("notices_ignored", notices_ignored),
        ("port_closures_sent", port_closures_sent),
        ("port_closures_received", port_closures_received),
        ("atomics_executed", atomics_executed),
        ("atomic_duplicates", atomic_duplicates),
        ("atomic_stale", atomic_stale),
        ("unexpected", unexpected),
        ("unexpected_bytes_copied", unexpected_bytes_copied),
        ("coll_unexpected", coll_unexpected),
        ("coll_refused", coll_refused),
        ("coll_resumes_sent", coll_resumes_sent),
        ("coll_resumes_received", coll_resumes_received),
        ("coll_unmatched", coll_unmatched),
        ("coll_abandoned", coll_abandoned),
        ("coll_deferred", coll_deferred),
        ("coll_forwarded_early", coll_forwarded_early),
        ("nicvm_invocations", nicvm_invocations),
        ("marked_delivered", marked_delivered),
        ("interrupts_raised", interrupts_raised),
        ("interrupts_suppressed", interrupts_suppressed),
        ("vm_instructions", vm_instructions),
        ("nicvm_errors", nicvm_errors),
    ];
    let mut rows: Vec<(&str, String)> = counters.iter().filter(|(_, v)| **v > 0).map(|(n, v)| (*n, v.to_string())).collect();
    if let Some(node) = first_failed {
        // Node id = rank in a job of the runtime.
        rows.push(("first_failed", format!("rank {}", node.0)));
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_what_is_not_zero_aligned_under_the_rank() {
        let s = Stats { malformed: 2, retransmits: 1234, first_failed: Some(outboard_engine::NodeId(3)), ..Stats::default() };
        let t = stats_table(1, &s);
        assert_eq!(
            t,
            "outboard stats rank 1: engine counters that are not 0\n\
             outboard stats rank 1:   malformed               2\n\
             outboard stats rank 1:   retransmits          1234\n\
             outboard stats rank 1:   first_failed       rank 3\n"
        );
        assert!(!t.contains("Stats {"), "{t}");
    }

    #[test]
    fn all_zero_is_the_header_alone() {
        assert_eq!(stats_table(0, &Stats::default()), format!("outboard stats rank 0: {HEADER}\n"));
    }
}
