//! The registered name closest to a misspelt one.

use crate::registry::ALL;

/// The registered name nearest to `name` by edit distance, if it is near
/// enough to be a plausible misspelling (at most a third of its length
/// away, and at most 4 edits; a missing `_MS` is 3). Among those, a name
/// that `name` begins (a truncated name) comes first.
pub fn closest(name: &str) -> Option<&'static str> {
    let limit = (name.len() / 3).min(4);
    ALL.iter()
        .map(|s| {
            (
                !s.name().starts_with(name),
                distance(name, s.name()),
                s.name(),
            )
        })
        .filter(|(_, d, _)| *d <= limit)
        .min()
        .map(|(_, _, n)| n)
}

/// Levenshtein distance over bytes (names are ASCII; other bytes only
/// make the distance larger).
fn distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, &ca) in a.iter().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_names_only() {
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(
            closest("OUTBOARD_PEER_TIMEOUT"),
            Some("OUTBOARD_PEER_TIMEOUT_MS")
        );
        assert_eq!(closest("OUTBOARD_UDP_GS0"), Some("OUTBOARD_UDP_GSO"));
        assert_eq!(
            closest("OUTBOARD_MPI_MAXBYTES"),
            Some("OUTBOARD_MPI_MAX_BYTES")
        );
        assert_eq!(
            closest("OUTBOARD_EAGER"),
            Some("OUTBOARD_EAGER_MAX"),
            "not OUTBOARD_ADDR, as far"
        );
        assert_eq!(closest("OUTBOARD_WHATEVER_ELSE"), None);
    }
}
